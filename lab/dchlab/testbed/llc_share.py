"""How the devices share the one LLC (issue 41 item 3; docs/llc_sharing.md): the
`llc_share` field of a run (TestbedConfig, RunConfig, a campaign condition, `dch shell
--llc-share`, `dch pageload --llc-share`) names the rule, and this module says what each
rule adds to the agents' and the LLC emulator's command lines. One place per rule:

- `none`: today's agents, each modelling the LLC queue from its own traffic; nothing
  is added, so a run is exactly what it was before the field existed.
- `token-bucket` (rule b): the gateway holds each device's downlink to C/N of the LLC
  (`--llc-share token-bucket --llc-capacity C`, split among its N configured devices)
  and each client its own uplink to C/N (`--llc-share-rate`); an over-budget packet
  goes on the HBC, never dropped.
- `probe` (rule c): every sender learns the other users' LLC queue from its LLC probes
  and adds it to Algorithm 1's `queue_llc` (`--llc-share probe`): each client for its
  uplink and the gateway, per device, for the downlink. The gateway sends most of a
  page load's bytes, so a client-only rule (c) left the page's downlink under rule (a)
  (measured: docs/results.md "URLLC shared by N devices").
- `priority` (rule d): the shared LLC emulator serves control packets first
  (`chanemu --control-first`); the agents as today.

C is the LLC's nominal rate in the agent's sending direction (the `--llc-mbit` it
already gets), N the testbed's devices.
"""

from __future__ import annotations

#: The rules, in the order docs/llc_sharing.md gives them; "none" is the default.
RULES = ("none", "token-bucket", "probe", "priority")


def check(value: object, where: str = "llc_share") -> str:
    """`value` if it names a rule, else ValueError naming `where` and the choices."""
    if not isinstance(value, str) or value not in RULES:
        raise ValueError(f"{where}: expected one of {', '.join(RULES)}, got {value!r}")
    return value


def needs_agents(rule: str) -> bool:
    """Whether the rule lives in the dchannel agents (so needs an agent scheme)."""
    return rule in ("token-bucket", "probe")


def refusal(rule: str, scheme_kind: str) -> str | None:
    """Why `rule` cannot run with a scheme of `scheme_kind` (None: it can)."""
    if needs_agents(rule) and scheme_kind != "agent":
        return (f"llc_share = {rule}: the rule runs in the dchannel agents; needs an agent "
                f"scheme, not a {scheme_kind} one")  # fmt: skip
    return None


def agent_args(rule: str, role: str, llc_mbit: float, devices: int) -> list[str]:
    """The flags `rule` adds to `dchannel <role>` (gateway or client) whose LLC runs at
    `llc_mbit` in its sending direction, in a testbed of `devices` devices."""
    capacity = round(llc_mbit * 1e6)
    if rule == "token-bucket":
        if role == "gateway":
            return ["--llc-share", "token-bucket", "--llc-capacity", str(capacity)]
        # the same equal split the gateway makes (ShareConfig::equal_split: rounded down)
        return ["--llc-share", "token-bucket", "--llc-share-rate", str(capacity // devices)]
    if rule == "probe":
        return ["--llc-share", "probe"]
    return []


def chanemu_args(rule: str, link: str) -> list[str]:
    """The flags `rule` adds to the emulator of `link` (only the LLC's)."""
    return ["--control-first"] if rule == "priority" and link == "llc" else []
