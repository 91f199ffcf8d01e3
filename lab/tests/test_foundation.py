"""The frame of the repository: CLI discovery, the CI entry point, the test tally."""

from __future__ import annotations

import os
import re
import subprocess
import time

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
