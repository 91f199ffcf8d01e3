"""`dch cleanup` removes a LocalReplay's namespace whose owner died without closing it
(SIGKILL: no `close`, no record) and keeps one whose owner lives (root)."""

from __future__ import annotations

import os
import subprocess

from conftest import require_root

from dchlab.testbed.runrecord import LOCALREPLAY_NETNS_RE, cleanup_dead_runs, list_netns
from dchlab.workloads.localreplay import localreplay_netns


def test_the_name_carries_the_owner_pid_and_fits_ip_netns() -> None:
    ns = localreplay_netns(4194303, "beef")  # the largest Linux pid (2^22 - 1)
    assert ns == "dchlr3fffffbeef" and len(ns) == 15
    m = LOCALREPLAY_NETNS_RE.match(ns)
    assert m is not None and int(m.group(1), 16) == 4194303
    assert not LOCALREPLAY_NETNS_RE.match("dchlr123beef")  # the old pid % 100000 names


def test_cleanup_removes_a_dead_owners_namespace_and_keeps_a_live_ones() -> None:
    require_root()
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is now free (and not reused this quickly)
    orphan = localreplay_netns(dead.pid, os.urandom(2).hex())
    mine = localreplay_netns(os.getpid(), os.urandom(2).hex())
    for ns in (orphan, mine):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        removed = cleanup_dead_runs()
        assert f"netns {orphan}" in removed
        assert orphan not in list_netns()
        assert mine in list_netns()
    finally:
        for ns in (orphan, mine):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
