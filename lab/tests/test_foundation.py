"""The frame of the repository: CLI discovery, the CI entry point, the test tally."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from dchlab import cli
from dchlab.commands import test as test_cmd
from dchlab.paths import repo_root


def test_every_command_module_registers_with_help() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = set(sub.choices)  # type: ignore[arg-type]
    assert "test" in names
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        assert p.description or p.format_help(), name
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([name, "--help"])
        assert exc.value.code == 0


def test_a_command_is_documented_once_by_its_module_docstring() -> None:
    import argparse

    from dchlab.commands import add_command

    parser = argparse.ArgumentParser(prog="dch")
    sub = parser.add_subparsers(dest="command")
    doc = """`dch curl-phases URL`: DNS, TCP and TLS times of a fetch.

    Longer text that --help shows,
    keeping its line breaks.
    """
    p = add_command(sub, doc, lambda a: 0)
    assert sub.choices["curl-phases"] is p  # type: ignore[index]
    assert p.description is not None
    assert p.description.startswith("DNS, TCP and TLS times of a fetch.\n")
    assert p.description.endswith("Longer text that --help shows,\nkeeping its line breaks.")
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert helps["curl-phases"] == "DNS, TCP and TLS times of a fetch"
    assert parser.parse_args(["curl-phases"]).func(None) == 0
    # a subcommand's docstring names its group too; the name is the last word
    q = add_command(sub, "`dch traces import ping FILE`: ping output -> RTT.", None)
    assert sub.choices["ping"] is q  # type: ignore[index]
    for bad in (None, "", "dch x: no backticks", "`dch X`: upper-case name"):
        with pytest.raises(ValueError, match="docstring"):
            add_command(sub, bad, lambda a: 0)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    root = repo_root()
    readme = (root / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    commands = [line.strip() for b in blocks for line in b.splitlines() if line.strip()]
    assert commands == ["./dch demo", "./dch test"], commands
    ci = (root / ".ci" / "run").read_text()
    assert re.search(r"^exec \./dch test$", ci, re.M), ci


def test_cargo_summary_lines_are_tallied() -> None:
    out = (
        "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured\n"
        "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured\n"
    )
    found = [m.groups() for m in test_cmd._CARGO_RESULT.finditer(out)]
    assert found == [("ok", "12", "0", "1"), ("FAILED", "3", "2", "0")]


def test_lint_failure_counts_as_failed_test() -> None:
    tally = test_cmd.Tally()
    tally.check("ruff check", False)
    tally.check("cargo fmt --check", True)
    assert (tally.passed, tally.failed, tally.failures) == (1, 1, ["ruff check"])


CARGO_OUTPUT = """\
     Running unittests src/lib.rs (target/release/deps/chanemu-0a)
running 3 tests
test a ... ok
test b ... ignored, needs root
test c ... FAILED
failures:

---- stats::tests::c stdout ----
thread 'c' panicked
test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out
     Running tests/netns.rs (target/release/deps/netns-0b)
test result: ok. 4 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out
"""

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a" name="test_ok2" time="0.1"/>
<testcase classname="tests.test_a" name="test_bad" time="0.1"><failure message="x"/></testcase>
<testcase classname="tests.test_a" name="test_err" time="0.1"><error message="y"/></testcase>
<testcase classname="tests.test_b" name="test_root" time="0.0">
<skipped type="pytest.skip" message="needs root (network namespaces)"/></testcase>
</testsuite></testsuites>"""


def test_tally_counts_lint_apart_from_tests_and_skips_apart_from_passes(
    tmp_path: Path,
) -> None:
    """Hand-counted: cargo 1+4 passed, 1 failed, 1+2 ignored (skipped); pytest 2
    passed, 2 failed (failure, error), 1 skipped; five lint steps, one failed."""
    tally = test_cmd.Tally()
    for name, ok in [("cargo fmt --check", True), ("cargo clippy", True), ("ruff check", False),
                     ("ruff format --check", True), ("mypy dchlab", True)]:  # fmt: skip
        tally.lint(name, ok)
    test_cmd.tally_cargo(CARGO_OUTPUT, 101, tally)
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    test_cmd.tally_pytest(junit, 1, tally)
    assert (tally.passed, tally.failed, tally.skipped) == (7, 3, 4)
    assert (tally.lint_passed, tally.lint_failed) == (4, 1)
    assert tally.failures == [
        "lint: ruff check",
        "cargo: stats::tests::c",
        "pytest: tests.test_a::test_bad",
        "pytest: tests.test_a::test_err",
    ]
    assert not tally.ok
    assert tally.summary(2.04) == [
        "lint: 4 passed, 1 failed",
        "tests: 7 passed, 3 failed, 4 skipped (2.0 min)",
        "7 passed, 4 failed",  # the parsed last line: every failure, no lint step as a pass
    ]


def test_lint_steps_alone_fail_the_run_but_pass_no_test() -> None:
    tally = test_cmd.Tally()
    tally.lint("mypy dchlab", False)
    assert (tally.passed, tally.failed, tally.lint_failed) == (0, 0, 1)
    assert not tally.ok and tally.summary(0)[-1] == "0 passed, 1 failed"
    clean = test_cmd.Tally()
    for _ in range(5):
        clean.lint("step", True)
    assert clean.ok and clean.summary(0)[0] == "lint: 5 passed, 0 failed"
    assert clean.summary(0)[-1] == "0 passed, 0 failed"  # lint passes are not tests


def test_pytest_collecting_nothing_is_a_failure(tmp_path: Path) -> None:
    empty = tmp_path / "empty.xml"
    empty.write_text('<testsuites><testsuite name="pytest" tests="0"/></testsuites>')
    tally = test_cmd.Tally()
    test_cmd.tally_pytest(empty, test_cmd.PYTEST_NO_TESTS, tally)
    assert (tally.passed, tally.failed) == (0, 1) and not tally.ok
    assert tally.failures == ["pytest (exit status 5: no tests collected)"]
    # all skipped, exit 0: skips, no failure, no pass
    skipped = tmp_path / "skipped.xml"
    skipped.write_text(
        '<testsuites><testsuite name="pytest"><testcase classname="t" name="test_root">'
        '<skipped message="needs root (network namespaces)"/></testcase></testsuite></testsuites>'
    )
    tally = test_cmd.Tally()
    test_cmd.tally_pytest(skipped, 0, tally)
    assert (tally.passed, tally.failed, tally.skipped) == (0, 0, 1) and tally.ok
    # pytest killed before writing its XML
    tally = test_cmd.Tally()
    test_cmd.tally_pytest(tmp_path / "absent.xml", -9, tally)
    assert tally.failures == ["pytest (did not finish: killed by SIGKILL, no absent.xml)"]
    # a cargo build error: no result line to count by
    tally = test_cmd.Tally()
    test_cmd.tally_cargo("error: could not compile `x`\n", 101, tally)
    assert tally.failures == ["cargo test (build or harness failure)"]


@pytest.mark.skipif(os.geteuid() != 0, reason="setup.sh installs apt packages: needs root")
def test_setup_is_idempotent_and_fast_when_installed() -> None:
    # `./dch test` has just run the installer, so a second run must find everything in
    # place: no apt install, no virtualenv rebuild, only a no-op cargo build.
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(repo_root() / "scripts" / "setup.sh")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert "installing apt packages" not in proc.stderr, proc.stderr
    assert "preparing the Python virtualenv" not in proc.stderr, proc.stderr
    assert elapsed < 120, f"setup took {elapsed:.0f} s with nothing to install"
