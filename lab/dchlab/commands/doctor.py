"""`dch doctor`: check the machine (TUN, netns, MPTCP, tools, built binaries).

Check everything the lab needs and print, for each missing piece, the command that
installs or builds it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from dchlab.commands import add_command
from dchlab.paths import target_dir

BINARIES = ("chanemu", "dchannel", "webreplay", "objproxy", "bguser")


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def check_root() -> tuple[bool, str]:
    return os.geteuid() == 0, "run as root (namespaces, TUN devices, sysctls)"


def check_tun() -> tuple[bool, str]:
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
        os.close(fd)
        return True, "/dev/net/tun"
    except OSError as exc:
        return (
            False,
            f"/dev/net/tun unusable ({exc}): `modprobe tun` (or run the container with --device /dev/net/tun)",
        )


def check_netns() -> tuple[bool, str]:
    name = f"dtbdoctor{os.getpid()}"
    add = _run(["ip", "netns", "add", name])
    if add.returncode != 0:
        return (
            False,
            f"cannot create a network namespace: {add.stderr.strip()} (needs CAP_SYS_ADMIN; install iproute2)",
        )
    veth = _run(
        ["ip", "-n", name, "link", "add", "name", "vdoc0", "type", "veth", "peer", "name", "vdoc1"]
    )
    _run(["ip", "netns", "del", name])
    if veth.returncode != 0:
        return False, f"namespaces work but veth does not: {veth.stderr.strip()} (`modprobe veth`)"
    return True, "ip netns + veth"


def check_mptcp() -> tuple[bool, str]:
    p = Path("/proc/sys/net/mptcp/enabled")
    if not p.exists():
        return False, "kernel without MPTCP (CONFIG_MPTCP): the mptcp scheme is unavailable"
    if p.read_text().strip() != "1":
        return False, "MPTCP disabled: `sysctl -w net.mptcp.enabled=1`"
    return True, "kernel MPTCP enabled"


def check_cc() -> tuple[bool, str]:
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    missing = [c for c in ("cubic", "bbr") if c not in avail]
    if missing:
        return (
            False,
            f"congestion control {', '.join(missing)} not loaded: `modprobe tcp_{missing[0]}`",
        )
    return True, "cubic and bbr available"


def _tool(name: str, package: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        path = shutil.which(name)
        return (True, path) if path else (False, f"`{name}` missing: apt-get install {package}")

    return check


def check_chromium() -> tuple[bool, str]:
    path = Path("/usr/lib/chromium/chromium")
    if path.exists() or shutil.which("chromium"):
        return True, str(path if path.exists() else shutil.which("chromium"))
    return False, "chromium missing: apt-get install chromium"


def _binary(name: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        path = target_dir() / "release" / name
        if path.exists():
            return True, str(path)
        return False, f"not built: `cargo build --release -p {name}` (or `./dch setup`)"

    return check


def check_leftovers() -> tuple[bool, str]:
    from dchlab.testbed.runrecord import NETNS_RE, RUN_DIR, RunRecord, list_netns

    live = set()
    dead = []
    for path in sorted(RUN_DIR.glob("dtb*.json")) if RUN_DIR.exists() else []:
        try:
            rec = RunRecord.load(path)
        except (OSError, ValueError, TypeError):
            dead.append(path.stem)
            continue
        if rec.owner_alive():
            live.add(rec.prefix)
        else:
            dead.append(rec.prefix)
    orphans = {m.group(1) for n in list_netns() if (m := NETNS_RE.match(n))} - live - set(dead)
    stale = sorted(set(dead) | orphans)
    if stale:
        return False, f"leftovers of dead testbed runs ({', '.join(stale)}): run `dch cleanup`"
    return True, f"no leftovers ({len(live)} live run(s))"


CHECKS: list[tuple[str, Callable[[], tuple[bool, str]]]] = [
    ("root", check_root),
    ("TUN", check_tun),
    ("network namespaces", check_netns),
    ("MPTCP", check_mptcp),
    ("congestion control", check_cc),
    ("ip (iproute2)", _tool("ip", "iproute2")),
    ("dnsmasq", _tool("dnsmasq", "dnsmasq-base")),
    ("mptcpize", _tool("mptcpize", "mptcpize")),
    ("certutil", _tool("certutil", "libnss3-tools")),
    ("curl", _tool("curl", "curl")),
    ("ss / nstat", _tool("ss", "iproute2")),
    ("chromium", check_chromium),
    *[(f"binary {b}", _binary(b)) for b in BINARIES],
    ("testbed leftovers", check_leftovers),
]


def cmd_doctor(args: argparse.Namespace) -> int:
    failed = 0
    for name, check in CHECKS:
        try:
            ok, detail = check()
        except Exception as exc:  # a check must never crash the doctor
            ok, detail = False, f"check failed: {exc}"
        failed += not ok
        print(f"  {'ok  ' if ok else 'FAIL'}  {name:20} {detail}")
    print(
        "all checks passed" if not failed else f"{failed} check(s) failed; fix them as shown above"
    )
    return 0 if not failed else 1


def register(sub: argparse._SubParsersAction) -> None:
    add_command(sub, __doc__, cmd_doctor)
