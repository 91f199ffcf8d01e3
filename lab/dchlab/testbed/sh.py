"""Running the helper commands of a testbed step (`ip`, `sysctl`, ...).

Every call names the step it belongs to, so a failure reads
"testbed step 'add HBC address in ue' failed: `ip -n ... addr add ...`: <stderr>".
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections.abc import Sequence

from dchlab.testbed.errors import TestbedError

log = logging.getLogger(__name__)


def run(
    cmd: Sequence[str],
    step: str,
    *,
    check: bool = True,
    timeout: float = 20.0,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `cmd` to completion; raise TestbedError naming `step` if it fails."""
    log.debug("%s: %s", step, shlex.join(cmd))
    try:
        proc = subprocess.run(
            list(cmd),
            text=True,
            input=input,
            capture_output=True,
            timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise TestbedError(
            f"testbed step {step!r} failed: {cmd[0]} is not installed ({exc})"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(
            f"testbed step {step!r} timed out after {timeout:.0f} s: `{shlex.join(cmd)}`"
        ) from exc
    if check and proc.returncode != 0:
        raise TestbedError(
            f"testbed step {step!r} failed (exit {proc.returncode}): `{shlex.join(cmd)}`: "
            f"{(proc.stderr or proc.stdout).strip()}"
        )
    return proc


def ip(ns: str | None, args: Sequence[str], step: str, *, check: bool = True) -> str:
    """`ip [-n NS] ARGS...`, returning stdout."""
    prefix = ["ip", "-n", ns] if ns else ["ip"]
    return run([*prefix, *args], step, check=check).stdout


def ip_batch(ns: str | None, lines: Sequence[str], step: str) -> None:
    """Many `ip` commands in one process (`ip -batch -`): fast for hundreds of addresses."""
    if not lines:
        return
    prefix = ["ip", "-n", ns] if ns else ["ip"]
    run([*prefix, "-batch", "-"], step, input="\n".join(lines) + "\n")


def sysctl(ns: str, settings: dict[str, str], step: str) -> None:
    """Set sysctls inside namespace `ns` (each netns has its own net.* values)."""
    args = [f"{k}={v}" for k, v in settings.items()]
    run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", *args], step)


def netns_exec(ns: str, cmd: Sequence[str]) -> list[str]:
    """The argv that runs `cmd` inside `ns` (with /etc/netns/NS/* bind-mounted)."""
    return ["ip", "netns", "exec", ns, *cmd]
