"""`dch test`: run the whole test suite (lint habits, cargo test, pytest).

Run cargo fmt --check, cargo clippy -D warnings, ruff, mypy, cargo test and pytest.
Needs root for the namespace tests. Ends with `N passed, N failed`.

Runs the habits (cargo fmt, cargo clippy -D warnings, ruff lint + format, mypy)
as checks that pass or fail like tests, then `cargo test` and `pytest`, shows
each runner's own output and ends with one line: `N passed, N failed`.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from dchlab.commands import add_command
from dchlab.paths import repo_root


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)

    def check(self, name: str, ok: bool) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(name)


def _run(cmd: list[str], cwd: Path, capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run a step, streaming its output; with `capture`, also keep it for parsing."""
    print(f"\n\033[1m$ {' '.join(cmd)}\033[0m", flush=True)
    if not capture:
        return subprocess.run(cmd, cwd=cwd, text=True)
    lines: list[str] = []
    with subprocess.Popen(
        cmd, cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(lines), None)


_CARGO_RESULT = re.compile(r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored")


def run_rust(root: Path, tally: Tally) -> None:
    tally.check(
        "cargo fmt --check", _run(["cargo", "fmt", "--all", "--check"], root).returncode == 0
    )
    clippy = [
        "cargo",
        "clippy",
        "--release",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]
    tally.check("cargo clippy -D warnings", _run(clippy, root).returncode == 0)
    proc = _run(["cargo", "test", "--release", "--workspace", "--no-fail-fast"], root, capture=True)
    found = False
    for m in _CARGO_RESULT.finditer(proc.stdout):
        found = True
        tally.passed += int(m.group(2))
        tally.failed += int(m.group(3))
        tally.skipped += int(m.group(4))
    if proc.returncode != 0 and (not found or "error:" in proc.stdout):
        # A build error or a crashed test binary: no per-test line to count it by.
        tally.check("cargo test (build or harness failure)", False)
    failed_names = re.findall(r"^---- (\S+) stdout ----$", proc.stdout, re.M)
    tally.failures.extend(f"cargo: {n}" for n in failed_names)


def run_python(root: Path, tally: Tally, pytest_args: list[str]) -> None:
    lab = root / "lab"
    py = sys.executable
    tally.check("ruff check", _run([py, "-m", "ruff", "check", "."], lab).returncode == 0)
    tally.check(
        "ruff format --check",
        _run([py, "-m", "ruff", "format", "--check", "."], lab).returncode == 0,
    )
    tally.check("mypy dchlab", _run([py, "-m", "mypy", "dchlab"], lab).returncode == 0)
    junit = root / "target" / "pytest-junit.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    proc = _run([py, "-m", "pytest", "-rs", f"--junitxml={junit}", *pytest_args], lab)
    if not junit.exists():
        # pytest itself died (a signal, or a library that ends the process): say how,
        # since the test it was running printed nothing
        rc = proc.returncode
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        tally.check(f"pytest (did not finish: {how}, no {junit.name})", False)
        return
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            tally.failed += 1
            tally.failures.append(f"pytest: {name}")
        elif case.find("skipped") is not None:
            tally.skipped += 1
        else:
            tally.passed += 1
    if proc.returncode not in (0, 5) and tally.failed == 0:
        tally.check("pytest (exit status)", False)


def cmd_test(args: argparse.Namespace) -> int:
    root = repo_root()
    tally = Tally()
    start = time.monotonic()
    if args.only in (None, "rust"):
        run_rust(root, tally)
    if args.only in (None, "python"):
        run_python(root, tally, args.pytest_args)
    minutes = (time.monotonic() - start) / 60
    print()
    if tally.failures:
        print("failed:")
        for name in tally.failures:
            print(f"  - {name}")
    print(f"({tally.skipped} skipped, {minutes:.1f} min)")
    print(f"{tally.passed} passed, {tally.failed} failed")
    return 0 if tally.failed == 0 else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_test)
    p.add_argument("--only", choices=["rust", "python"], help="run only one half")
    p.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (after --)")
