"""`dch test`: run the whole test suite (lint habits, cargo test, pytest).

Runs the habits (cargo fmt, cargo clippy -D warnings, ruff lint + format, mypy) as
lint steps, then `cargo test` and `pytest`, shows each runner's own output and ends
with a summary reported apart:

    lint: 5 passed, 0 failed
    tests: N passed, N failed, N skipped
    N passed, N failed

The last line stays last (scripts parse it): tests passed, and everything that failed
(tests, lint steps, a runner that did not finish). A test that cannot run here (no
root, a binary not built) is a skip with its reason (pytest `-rs`; Rust `ignored`),
never a pass. pytest's "no tests collected" (exit status 5) is a failure: a suite or
a `-k` that selects nothing has tested nothing. Needs root for the namespace tests.
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
    """What ran: lint steps and tests counted apart, and the names of what failed."""

    passed: int = 0  # tests
    failed: int = 0  # tests, and a runner that failed without naming a test
    skipped: int = 0  # tests that could not run here (pytest skips, Rust `ignored`)
    lint_passed: int = 0
    lint_failed: int = 0
    failures: list[str] = field(default_factory=list)

    def check(self, name: str, ok: bool) -> None:
        """One test-like outcome without a per-test report (a runner's exit status)."""
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(name)

    def lint(self, name: str, ok: bool) -> None:
        """One lint step (formatting, clippy, ruff, mypy): never counted as a test."""
        if ok:
            self.lint_passed += 1
        else:
            self.lint_failed += 1
            self.failures.append(f"lint: {name}")

    def summary(self, minutes: float) -> list[str]:
        """The closing lines; the last one (`N passed, N failed`) is what scripts parse."""
        return [
            f"lint: {self.lint_passed} passed, {self.lint_failed} failed",
            f"tests: {self.passed} passed, {self.failed} failed, {self.skipped} skipped"
            f" ({minutes:.1f} min)",
            f"{self.passed} passed, {self.failed + self.lint_failed} failed",
        ]

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.lint_failed == 0


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


PYTEST_NO_TESTS = 5  # pytest's exit status when it collected no test
_CARGO_RESULT = re.compile(r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored")


def run_rust(root: Path, tally: Tally) -> None:
    tally.lint(
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
    tally.lint("cargo clippy -D warnings", _run(clippy, root).returncode == 0)
    proc = _run(["cargo", "test", "--release", "--workspace", "--no-fail-fast"], root, capture=True)
    tally_cargo(proc.stdout, proc.returncode, tally)


def tally_cargo(output: str, returncode: int, tally: Tally) -> None:
    """Count `cargo test`'s per-binary `test result:` lines (ignored = skipped) and name
    its failed tests; a build error or crashed harness without such lines is a failure."""
    found = False
    for m in _CARGO_RESULT.finditer(output):
        found = True
        tally.passed += int(m.group(2))
        tally.failed += int(m.group(3))
        tally.skipped += int(m.group(4))
    if returncode != 0 and (not found or "error:" in output):
        # A build error or a crashed test binary: no per-test line to count it by.
        tally.check("cargo test (build or harness failure)", False)
    # libtest prints `---- name stdout ----`, libtest-mimic (the namespace tests) `---- name ----`
    failed_names = re.findall(r"^---- (\S+)(?: stdout)? ----$", output, re.M)
    tally.failures.extend(f"cargo: {n}" for n in failed_names)


def run_python(root: Path, tally: Tally, pytest_args: list[str]) -> None:
    lab = root / "lab"
    py = sys.executable
    tally.lint("ruff check", _run([py, "-m", "ruff", "check", "."], lab).returncode == 0)
    tally.lint(
        "ruff format --check",
        _run([py, "-m", "ruff", "format", "--check", "."], lab).returncode == 0,
    )
    tally.lint("mypy dchlab", _run([py, "-m", "mypy", "dchlab"], lab).returncode == 0)
    junit = root / "target" / "pytest-junit.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    proc = _run([py, "-m", "pytest", "-rs", f"--junitxml={junit}", *pytest_args], lab)
    tally_pytest(junit, proc.returncode, tally)


def tally_pytest(junit: Path, returncode: int, tally: Tally) -> None:
    """Count pytest's results from its JUnit XML (skipped apart from passed). No XML
    (pytest was killed) or a non-zero exit status no failed test explains — 5, "no
    tests collected", included — is one failure named after it."""
    if not junit.exists():
        # pytest itself died (a signal, or a library that ends the process): say how,
        # since the test it was running printed nothing
        how = (
            f"killed by {signal.Signals(-returncode).name}"
            if returncode < 0
            else f"exit status {returncode}"
        )
        tally.check(f"pytest (did not finish: {how}, no {junit.name})", False)
        return
    failed_before = tally.failed
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            tally.failed += 1
            tally.failures.append(f"pytest: {name}")
        elif case.find("skipped") is not None:
            tally.skipped += 1
        else:
            tally.passed += 1
    if returncode != 0 and tally.failed == failed_before:
        why = "no tests collected" if returncode == PYTEST_NO_TESTS else "no failed test"
        tally.check(f"pytest (exit status {returncode}: {why})", False)


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
    for line in tally.summary(minutes):
        print(line)
    return 0 if tally.ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_test)
    p.add_argument("--only", choices=["rust", "python"], help="run only one half")
    p.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (after --)")
