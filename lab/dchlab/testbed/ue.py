"""Programs the testbed runs on ue (the workloads): started in ue's namespace with the
testbed's environment, tracked, and stopped at teardown or when a daemon dies."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Where the TLS stacks on ue (ours, OpenSSL, curl, Python requests, Node) look for a CA.
CA_VARIABLES = (
    "DCH_CA",
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)


def base_env(
    ca_cert: Path, *, prefix: str, scheme: str, run_dir: Path, ue_netns: str
) -> dict[str, str]:
    """The environment of every program on ue before the scheme's: the testbed CA, the
    run's prefix, scheme, run directory and ue namespace."""
    return {
        **dict.fromkeys(CA_VARIABLES, str(ca_cert)),
        "DCH_PREFIX": prefix,
        "DCH_SCHEME": scheme,
        "DCH_RUN_DIR": str(run_dir),
        "DCH_NETNS_UE": ue_netns,
    }


class UePrograms:
    """The programs started on ue and still tracked (`procs`)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[Any]] = []

    def popen(
        self, argv: Sequence[str], env: Mapping[str, str], **kw: Any
    ) -> subprocess.Popen[Any]:
        """Start `argv` (already wrapped for ue) and track it."""
        p = subprocess.Popen(list(argv), env=dict(env), **kw)
        self.procs.append(p)
        return p

    def run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        input: Any = None,
        timeout: float | None = None,
        capture_output: bool = False,
        **kw: Any,
    ) -> subprocess.CompletedProcess[Any]:
        """Run `argv` to completion like subprocess.run (killed if interrupted or timed
        out); tracked while it runs."""
        if capture_output:
            kw["stdout"] = kw["stderr"] = subprocess.PIPE
        if input is not None:
            kw["stdin"] = subprocess.PIPE
        p = self.popen(argv, env, **kw)
        try:
            out, err = p.communicate(input, timeout=timeout)
        except BaseException:
            terminate(p)
            raise
        finally:
            with contextlib.suppress(ValueError):
                self.procs.remove(p)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def signal_all(self) -> None:
        """SIGTERM to every tracked program still running (waited for by stop_all)."""
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.terminate()

    def stop_all(self, grace: float = 2.0) -> None:
        """Stop every tracked program: SIGTERM, SIGKILL after `grace` seconds."""
        for p in list(self.procs):
            terminate(p, grace)


def terminate(p: subprocess.Popen[Any], grace: float = 2.0) -> None:
    """SIGTERM a program, SIGKILL it after `grace` seconds; reaped either way."""
    if p.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        p.terminate()
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(2)
