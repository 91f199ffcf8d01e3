"""Object-level steering schemes: `objproxy` on ue picks a channel per web object.

`ians` (Socket Intents threshold policy with IANS range-request size discovery),
`obj-size:N` (objects below N bytes on the LLC), `obj-oracle` (NSDI'23 Obj-steering,
sizes from the corpus manifest), `obj-priority` (HotMobile'21: only the requests Chromium
gives the highest priority on the LLC) and `passthrough` (everything on the HBC, to measure the
proxy's own cost). See docs/objproxy.md.

Plumbing on ue: both links are up; the proxy's HBC connections are bound to device
`hbc` and source 198.18.1.2, its LLC connections to `llc` and 198.18.2.2, with a routing
table per source address. The default route is the HBC; DNS (the proxy resolves every
origin) goes over the LLC, as IANS resolves on the lower-latency interface — except
under `passthrough`, where everything, DNS included, stays on the HBC. gw needs
nothing: its peer routes send replies for 198.18.1.2 over hbc and for 198.18.2.2 over
llc, i.e. back on the channel each connection came on.

Commands on ue get `http_proxy`/`https_proxy`; the Chromium driver is pointed (through
`DCH_CHROMIUM`) at a wrapper in the run directory that replaces the driver's
`--no-proxy-server` with `--proxy-server`.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import TYPE_CHECKING

from dchlab.paths import binary
from dchlab.testbed import addressing as A
from dchlab.testbed.channels import nominal_mbit, profile_dict
from dchlab.testbed.errors import TestbedError
from dchlab.testbed.schemes import Scheme, register

if TYPE_CHECKING:
    from dchlab.testbed.core import Testbed

PORT = 3128
PROXY_URL = f"http://127.0.0.1:{PORT}"
TABLES = {"hbc": "101", "llc": "102"}

_WRAPPER = """#!/bin/sh
# Chromium through objproxy (written by the objproxy testbed scheme). The page-load
# driver passes --no-proxy-server, which would override --proxy-server: drop it.
for a do
  shift
  [ "$a" = "--no-proxy-server" ] || set -- "$@" "$a"
done
exec {real} --proxy-server={proxy} "$@"
"""


def nominal_rtt_ms(resolved: str) -> float | None:
    """The channel's average RTT (ms) for the proxy's priors: fixed and gaussian as
    given, a timeline averaged; None when the profile says nothing usable."""
    delay = profile_dict(resolved).get("delay", {})
    kind = delay.get("kind")
    if kind == "fixed":
        return float(delay["rtt_ms"])
    if kind == "gaussian":
        return float(delay["mean_rtt_ms"])
    if kind == "timeline":
        with open(delay["file"], newline="") as f:
            vals = [float(r["rtt_ms"]) for r in csv.DictReader(f)]
        return sum(vals) / len(vals) if vals else None
    return None


@register("ians", help="objproxy: IANS threshold policy per object, range-request size discovery")
@register(
    "obj-size",
    help="objproxy: objects below N bytes on the LLC (obj-size:N, e.g. obj-size:6000)",
    params="required",
)
@register(
    "obj-oracle",
    help="objproxy: NSDI'23 Obj-steering, object sizes from the corpus manifest "
    "(obj-oracle:committed: also counting the bytes already committed to each channel)",
    params="optional",
)
@register(
    "obj-priority",
    help="objproxy: HotMobile'21 obj-priority, only Chromium's highest-priority requests "
    "(priority: u=0) on the LLC",
)
@register("passthrough", help="objproxy: every object on the HBC (the proxy's own cost)")
class ObjproxyScheme(Scheme):
    kind = "proxy"
    # env() writes the wrapper it points Chromium at (only the run directory and the
    # proxy's fixed address go into it), so Chromium may start before setup(): it
    # talks to the proxy only once it navigates, after the testbed is up.

    def required_binaries(self) -> list[str]:
        return ["objproxy"]

    def policy(self) -> str:
        return self.spec

    def proxy_argv(self, tb: Testbed) -> list[str]:
        hbc, llc = tb.channels["hbc"], tb.channels["llc"]
        argv = [
            str(binary("objproxy")),
            "--listen", f"127.0.0.1:{PORT}",
            "--policy", self.policy(),
            "--ca-cert", str(tb.ca_cert), "--ca-key", str(tb.ca_key),
            "--upstream-ca", str(tb.ca_cert),
            "--hbc-dev", "hbc", "--hbc-src", A.HBC.near,
            "--llc-dev", "llc", "--llc-src", A.LLC.near,
            "--hbc-mbit", f"{nominal_mbit(hbc, 'downlink'):g}",
            "--llc-mbit", f"{nominal_mbit(llc, 'downlink'):g}",
            "--stats-json", str(tb.expect_stats("proxy", "objproxy", "objproxy.stats.json")),
        ]  # fmt: skip
        for name, resolved in (("hbc", hbc), ("llc", llc)):
            rtt = nominal_rtt_ms(resolved)
            if rtt is not None:
                argv += [f"--{name}-rtt-ms", f"{rtt:g}"]
        if tb.cfg.corpus:
            argv += ["--corpus", str(Path(tb.cfg.corpus).resolve())]
        elif self.name == "obj-oracle":
            raise TestbedError("scheme obj-oracle needs a corpus (object sizes come from it)")
        return argv

    def setup(self, tb: Testbed) -> None:
        argv = self.proxy_argv(tb)  # errors before any route changes
        for link in (A.HBC, A.LLC):
            table = TABLES[link.name]
            tb.ip(
                "ue",
                ["route", "add", "default", "dev", link.name, "src", link.near, "table", table],
                f"route table {table} via {link.name} on ue",
            )
            tb.ip(
                "ue",
                ["rule", "add", "from", link.near, "table", table, "priority", f"1{table}"],
                f"rule from {link.near} on ue",
            )
        tb.ip(
            "ue",
            ["route", "add", "default", "dev", A.HBC.name, "src", A.HBC.near],
            "default route via hbc on ue",
        )
        if self.name != "passthrough":  # passthrough: DNS too on the HBC (the default)
            tb.ip(
                "ue",
                ["route", "add", f"{A.DNS_SERVER}/32", "dev", A.LLC.name, "src", A.LLC.near],
                "DNS over the LLC on ue",
            )
        tb.spawn("objproxy", argv, ns="ue", ready=f"READY 127.0.0.1:{PORT}")
        tb.wait_ready(["objproxy"])

    def env(self, tb: Testbed) -> dict[str, str]:
        wrapper = tb.run_dir / "chromium-via-objproxy"
        if not wrapper.exists():
            real = os.environ.get("DCH_CHROMIUM", "/usr/lib/chromium/chromium")
            wrapper.write_text(_WRAPPER.format(real=real, proxy=PROXY_URL))
            wrapper.chmod(0o755)
        no_proxy = "localhost,127.0.0.1,::1"
        return {
            "http_proxy": PROXY_URL,
            "https_proxy": PROXY_URL,
            "HTTP_PROXY": PROXY_URL,
            "HTTPS_PROXY": PROXY_URL,
            "no_proxy": no_proxy,
            "NO_PROXY": no_proxy,
            "DCH_PROXY": PROXY_URL,
            "DCH_CHROMIUM": str(wrapper),
        }

    def stop_first(self) -> list[str]:
        return ["objproxy"]
