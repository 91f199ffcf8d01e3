"""The Debian package (`cargo deb -p dchannel --strip`, docs/deploy.md "As services"):
it holds the agent, both systemd units and the commented examples, nothing of the
lab; the packaged binary runs; the units pass `systemd-analyze verify`.

Skipped without cargo-deb (`cargo install cargo-deb`) or the release binary. Packs the
built binary (`--no-build`): ~5 s.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require_binaries

from dchlab.paths import repo_root

FILES = {
    "./usr/bin/dchannel",
    "./usr/lib/systemd/system/dchannel-client@.service",
    "./usr/lib/systemd/system/dchannel-gateway@.service",
    "./usr/share/doc/dchannel/copyright",
    "./usr/share/doc/dchannel/deploy.md",
    "./usr/share/doc/dchannel/examples/client.conf",
    "./usr/share/doc/dchannel/examples/devices.toml",
    "./usr/share/doc/dchannel/examples/gateway.conf",
}
UNITS = ("dchannel-client@", "dchannel-gateway@")


def _build(out: Path) -> Path:
    if shutil.which("cargo") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("needs cargo and dpkg-deb")
    if subprocess.run(["cargo", "deb", "--version"], capture_output=True).returncode != 0:
        pytest.skip("cargo-deb not installed (cargo install cargo-deb)")
    require_binaries("dchannel")
    r = subprocess.run(
        ["cargo", "deb", "-p", "dchannel", "--strip", "--no-build", "--output", str(out)],
        cwd=repo_root(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (deb,) = out.glob("dchannel_*.deb")
    return deb


def test_package_holds_agent_units_and_examples_only(tmp_path: Path) -> None:
    deb = _build(tmp_path / "deb")
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True)
    files = {ln.split()[-1] for ln in listing.stdout.splitlines() if not ln.startswith("d")}
    assert files == FILES, listing.stdout
    info = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True, text=True)
    assert "iproute2" in info.stdout, info.stdout
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    binary = root / "usr/bin/dchannel"
    version = subprocess.run([binary, "--version"], capture_output=True, text=True)
    assert version.stdout.startswith("dchannel "), version
    key = tmp_path / "k"
    subprocess.run([binary, "genkey", "--out", key], check=True)
    pub = subprocess.run([binary, "pubkey", key], capture_output=True, text=True, check=True)
    assert len(pub.stdout.strip()) == 44
    units = root / "usr/lib/systemd/system"
    for unit in UNITS:
        text = (units / f"{unit}.service").read_text()
        for line in ("Restart=on-failure", "CapabilityBoundingSet=CAP_NET_ADMIN",
                     "AmbientCapabilities=CAP_NET_ADMIN", "DynamicUser=yes",
                     "EnvironmentFile=/etc/dchannel/%i.conf"):  # fmt: skip
            assert line + "\n" in text, (unit, line)
    if shutil.which("systemd-analyze") is None:
        return
    # verify needs the unit's binary where ExecStart says: point it at the extracted one
    check = tmp_path / "units"
    check.mkdir()
    for unit in UNITS:
        text = (units / f"{unit}.service").read_text()
        (check / f"{unit}.service").write_text(text.replace("/usr/bin/dchannel", str(binary)))
        (check / f"{unit}x.service").symlink_to(f"{unit}.service")
    r = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(f"{u}x.service" for u in UNITS)],
        cwd=check, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0 and "dchannel" not in r.stderr, r.stderr
