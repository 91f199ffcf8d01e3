"""Agent schemes: the dchannel client on ue and gateway on gw, with a policy.

The policy spec is passed verbatim to both agents (`--policy SPEC`), so every
policy the agents know is a scheme: `dchannel[:alpha=..]`, `all-hbc`, `all-llc`,
`pkt-size:N`, `pkt-control`, `pkt-uplink`, `pkt-state`, `asap`, `prewarm[:..]`, `burst[:..]`,
`realtime[:alpha=..]`, `realtime-dup[:alpha=..]`. Applications on ue
use the client's TUN (198.19.0.2, default route); gw routes that address back into
the gateway's TUN. Extra flags: `agent_args` go to both agents, `client_args` /
`gateway_args` to one (TestbedConfig; `dch shell --agent-arg/--client-arg/--gateway-arg`).

The agents run encrypted: every testbed run makes a fresh key pair per agent with
`dchannel genkey --out` / `dchannel pubkey` (files in the run dir, mode 0600) and a
one-device `--devices` file for the gateway. `--insecure` in agent_args (e.g.
`dch shell --agent-arg=--insecure`) runs the plaintext bearer-token mode instead,
for comparison.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dchlab.paths import binary
from dchlab.testbed import addressing as A
from dchlab.testbed import llc_share, reward_error, sh
from dchlab.testbed.channels import nominal_mbit
from dchlab.testbed.namespaces import device_roles
from dchlab.testbed.schemes import Scheme, register

if TYPE_CHECKING:
    from dchlab.testbed.config import TestbedConfig
    from dchlab.testbed.core import Testbed

TUN = "dch0"
INSECURE = "--insecure"


@dataclass(frozen=True)
class AgentKeys:
    """Key material of one testbed run: each agent's private key file, the
    gateway's public key and the gateway's devices file (every client).
    `client_key` is device 1's; `more_client_keys` those of devices 2 ... N."""

    gateway_key: Path
    client_key: Path
    gateway_public: str
    devices: Path
    more_client_keys: tuple[Path, ...] = ()

    def client_key_of(self, device: int) -> Path:
        """The private key file of device `device` (1-based)."""
        return self.client_key if device == 1 else self.more_client_keys[device - 2]


def client_role(i: int) -> str:
    """The client agent of device i (1-based): "client", then "client2" ... (its
    daemon name and stats key)."""
    return "client" if i == 1 else f"client{i}"


def make_keys(run_dir: Path, devices: int = 1) -> AgentKeys:
    """A fresh key pair per agent (the gateway and `devices` clients) under
    run_dir/keys, made with `dchannel genkey --out` (mode 0600) and `dchannel
    pubkey`, and the gateway's devices file: one device "ue" at 198.19.0.2, or
    "ue1" ... "ueN" at 198.19.0.(1+i)."""
    exe = str(binary("dchannel"))
    keys = run_dir / "keys"
    keys.mkdir(mode=0o700, parents=True, exist_ok=True)
    public: dict[str, str] = {}
    roles = ["gateway", *(client_role(i) for i in range(1, devices + 1))]
    for role in roles:
        path = keys / f"{role}.key"
        path.unlink(missing_ok=True)
        sh.run([exe, "genkey", "--out", str(path)], f"generate the {role}'s private key")
        out = sh.run([exe, "pubkey", str(path)], f"derive the {role}'s public key").stdout
        public[role] = out.strip()
    table = keys / "devices.toml"
    table.write_text("".join(
        f'[[device]]\nname = "{"ue" if devices == 1 else f"ue{i}"}"\n'
        f'public_key = "{public[client_role(i)]}"\naddress = "{A.device_agent_address(i)}"\n'
        for i in range(1, devices + 1)
    ))  # fmt: skip
    clients = [keys / f"{client_role(i)}.key" for i in range(1, devices + 1)]
    return AgentKeys(keys / "gateway.key", clients[0], public["gateway"], table, tuple(clients[1:]))


def insecure(cfg: TestbedConfig) -> bool:
    """Whether the agents run the plaintext token mode (`--insecure` in agent_args;
    it must be given to both agents, so not in client_args/gateway_args only)."""
    for args, where in ((cfg.client_args, "client_args"), (cfg.gateway_args, "gateway_args")):
        if INSECURE in args:
            raise ValueError(f"{where}: put {INSECURE} in agent_args (both agents need it)")
    return INSECURE in cfg.agent_args


#: The agents' lab-only flag that steers with the HBC emulator's true delay; its value
#: `auto` is replaced by the file the testbed has the HBC emulator publish it in
#: (`chanemu --oracle`, docs/chanemu.md "The delay oracle").
ORACLE_FLAG = "--hbc-owd-oracle"
ORACLE_AUTO = "auto"


def wants_oracle(cfg: TestbedConfig) -> bool:
    """Whether any agent argument asks for the HBC delay oracle."""
    return ORACLE_FLAG in (*cfg.agent_args, *cfg.client_args, *cfg.gateway_args)


def resolve_oracle(args: Sequence[str], oracle_file: Path | None) -> list[str]:
    """`args` with `--hbc-owd-oracle auto` pointing at the testbed's oracle file."""
    out = list(args)
    for i, a in enumerate(out[:-1]):
        if a == ORACLE_FLAG and out[i + 1] == ORACLE_AUTO:
            if oracle_file is None:
                raise ValueError(f"{ORACLE_FLAG} {ORACLE_AUTO}: this testbed has no HBC oracle")
            out[i + 1] = str(oracle_file)
    return out


def agent_argv(
    role: str,
    cfg: TestbedConfig,
    *,
    policy: str,
    token: str,
    llc_mbit: float,
    stats_json: Path,
    logs: dict[str, Path] | None = None,
    keys: AgentKeys | None = None,
    oracle_file: Path | None = None,
    devices: int = 1,
    device: int = 1,
    tokens: Sequence[str] = (),
    gateway_devs: bool = True,
) -> list[str]:
    """The argv of `dchannel gateway` (role "gateway", on gw) or `dchannel client`
    (role "client", on ue): the testbed's plumbing, then cfg.agent_args (both agents),
    then cfg.gateway_args or cfg.client_args (this role only). `llc_mbit` is the LLC's
    nominal rate in the direction this agent sends (gateway: downlink, client: uplink).
    `logs` ({"decisions": path, "arrivals": path}) adds --decision-log/--arrival-log.
    `keys` (from make_keys) is required unless cfg.agent_args has --insecure, in which
    case `token` authenticates the client instead. `oracle_file` is what
    `--hbc-owd-oracle auto` in the extra arguments stands for.

    Several devices (dchlab.testbed.devices): the client of `device` i (1-based) gets
    its tunnel address 198.19.0.(1+i) and key (keys.client_key_of(i)), or, insecure,
    its token `tokens[i-1]`; the gateway serves `devices` clients (their tokens,
    insecure) and binds to no channel device unless `gateway_devs`.
    """
    if role not in ("gateway", "client"):
        raise ValueError(f"agent role {role!r}: expected 'client' or 'gateway'")
    exe = str(binary("dchannel"))
    common = ["--policy", policy, "--tun", TUN]
    ue_agent = A.device_agent_address(device)
    if insecure(cfg):
        tokens = list(tokens) or [token]
        if len(tokens) != devices:
            raise ValueError(f"{devices} devices need {devices} tokens, got {len(tokens)}")
        clients = [
            ["--client", f"{A.device_agent_address(i)}={t}"] for i, t in enumerate(tokens, 1)
        ]
        auth = {
            "gateway": [a for c in clients for a in c],
            "client": ["--token", tokens[device - 1]],
        }
    elif keys is None:
        raise ValueError("encrypted agents need keys (make_keys), or --insecure in agent_args")
    else:
        auth = {
            "gateway": ["--key", str(keys.gateway_key), "--devices", str(keys.devices)],
            "client": [
                "--key",
                str(keys.client_key_of(device)),
                "--gateway-key",
                keys.gateway_public,
            ],
        }
    if logs:
        common += ["--decision-log", str(logs["decisions"]), "--arrival-log", str(logs["arrivals"])]
    if role == "gateway":
        return [exe, "gateway", *common, "--tun-addr", f"{A.GW_AGENT}/32",
                "--listen-hbc", f"{A.HBC.far}:{A.AGENT_PORT_HBC}",
                "--listen-llc", f"{A.LLC.far}:{A.AGENT_PORT_LLC}",
                *(["--hbc-dev", "hbc", "--llc-dev", "llc"] if gateway_devs else []),
                *auth["gateway"],
                "--llc-mbit", f"{llc_mbit:g}",
                *llc_share.agent_args(cfg.llc_share, role, llc_mbit, devices),
                "--stats-json", str(stats_json),
                *resolve_oracle([*cfg.agent_args, *cfg.gateway_args], oracle_file)]  # fmt: skip
    if role == "client":
        return [exe, "client", *common, "--tun-addr", f"{ue_agent}/32",
                "--hbc-dev", "hbc", "--hbc-gateway", f"{A.HBC.far}:{A.AGENT_PORT_HBC}",
                "--llc-dev", "llc", "--llc-gateway", f"{A.LLC.far}:{A.AGENT_PORT_LLC}",
                *auth["client"],
                "--llc-mbit", f"{llc_mbit:g}",
                *llc_share.agent_args(cfg.llc_share, role, llc_mbit, devices),
                "--stats-json", str(stats_json),
                *resolve_oracle([*cfg.agent_args, *cfg.client_args], oracle_file)]  # fmt: skip
    raise ValueError(f"agent role {role!r}: expected 'client' or 'gateway'")


#: The agents' policies, each a scheme of its own: name -> (help, params), params as
#: `register` takes them ("" none, "optional", "required").
POLICIES: dict[str, tuple[str, str]] = {
    "dchannel": ("NSDI'23 reward/cost steering (alpha=0.75; dchannel:alpha=X)", "optional"),
    "all-hbc": ("agents, every packet on the HBC", ""),
    "all-llc": ("agents, every packet on the LLC", ""),
    "pkt-size": ("agents, packets smaller than N bytes on the LLC (pkt-size:N)", "required"),
    "pkt-control": ("agents, TCP packets without payload on the LLC", ""),
    "pkt-uplink": ("agents, client→server on the LLC, server→client on the HBC", ""),
    "pkt-state": ("agents, HotMobile'21 packet-state heuristic", ""),
    "prewarm": (
        "dchannel, and the client wakes the HBC radio beside LLC packets "
        "(prewarm:alpha=A,gap_ms=G)",
        "optional",
    ),
    "asap": ("agents, DNS/handshakes/requests on the LLC, response data on the HBC", ""),
    "burst": (
        "dchannel, but a packet takes the LLC only if the rest of its burst would too "
        "(burst:alpha=A,gap_ms=G)",
        "optional",
    ),
    "realtime": (
        "WebRTC-aware: STUN/DTLS handshake, RTCP, data channel and whole frames that fit "
        "on the LLC, unordered; dchannel for other traffic (realtime:alpha=A)",
        "optional",
    ),
    "realtime-dup": (
        "realtime, and input events also on the other channel; the receiver delivers "
        "the first copy (realtime-dup:alpha=A)",
        "optional",
    ),
}


class AgentScheme(Scheme):
    kind = "agent"

    def required_binaries(self) -> list[str]:
        return ["dchannel"]

    def setup(self, tb: Testbed) -> None:
        n = tb.cfg.devices
        tokens = [secrets.token_hex(16) for _ in range(n)]
        keys = None if insecure(tb.cfg) else make_keys(tb.run_dir, n)
        llc = tb.channels["llc"]
        self.logs: dict[str, dict[str, Path]] = {}
        devices = device_roles(n)  # ue, ue2, ...: device i's namespace
        # gw, then the devices' clients: (daemon and stats name, role, namespace, device)
        agents = [("gateway", "gateway", "gw", 1)]
        agents += [(client_role(i), "client", ue, i) for i, ue in enumerate(devices, 1)]
        for name, role, ns, device in agents:
            direction = "downlink" if role == "gateway" else "uplink"
            if tb.cfg.decision_logs:
                self.logs[role] = {
                    "decisions": tb.run_dir / f"{role}.decisions.csv",
                    "arrivals": tb.run_dir / f"{role}.arrivals.csv",
                }
            tb.spawn(
                name,
                agent_argv(
                    role,
                    tb.cfg,
                    policy=self.spec,
                    token=tokens[0],
                    llc_mbit=nominal_mbit(llc, direction),
                    stats_json=tb.expect_stats("agents", name, f"{name}.stats.json"),
                    logs=self.logs.get(role),
                    keys=keys,
                    oracle_file=tb.oracle_file,
                    devices=n,
                    device=device,
                    tokens=tokens,
                    gateway_devs=n == 1,  # several devices: gw has hbc1..hbcN
                ),
                ns=ns,
            )
        self.agents = [name for name, *_ in agents]
        tb.wait_ready(self.agents)
        for i, ue in enumerate(devices, 1):
            tb.ip(
                "gw",
                ["route", "add", f"{A.device_agent_address(i)}/32", "dev", TUN],
                f"route {ue}'s agent address into the gateway TUN",
            )
            tb.ip(
                ue,
                ["route", "add", "default", "dev", TUN, "src", A.device_agent_address(i)],
                f"default route via the client TUN on {ue}",
            )

    def stop_first(self) -> list[str]:
        return [*getattr(self, "agents", ["gateway", "client"])[1:], "gateway"]

    def after_stop(self, tb: Testbed, stats: dict[str, Any]) -> None:
        """With cfg.decision_logs: log paths and the reward-estimation error (Fig. 11,
        definition in dchlab.testbed.reward_error) into the agents' stats."""
        logs = getattr(self, "logs", None)
        if not logs:
            return
        agents = stats.setdefault("agents", {})
        for role, paths in logs.items():
            entry = agents.setdefault(role, {})
            if isinstance(entry, dict):
                entry["logs"] = {k: str(v) for k, v in paths.items()}
        summary = reward_error.collect(logs)
        for role, direction in (("client", "uplink"), ("gateway", "downlink")):
            entry = agents.get(role)
            if isinstance(entry, dict):
                entry["reward_error_ms"] = summary[direction].pop("abs_ms")
        stats["reward_error"] = summary


for _name, (_help, _params) in POLICIES.items():
    register(_name, help=_help, params=_params)(AgentScheme)
