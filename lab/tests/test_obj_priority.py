"""The `obj-priority` scheme (HotMobile'21): registered for `dch pageload --scheme` and
campaigns, and it runs objproxy with `--policy obj-priority` (the policy and its tests:
crates/objproxy/src/policy/obj_priority.rs, tests/proxy.rs)."""

from __future__ import annotations

from dchlab.testbed.schemes import get_scheme, known_schemes


def test_obj_priority_is_a_registered_objproxy_scheme() -> None:
    ks = known_schemes()
    assert "obj-priority" in ks and "objproxy" in ks["obj-priority"]
    s = get_scheme("obj-priority")
    assert s.kind == "proxy" and s.spec == "obj-priority"
    assert s.required_binaries() == ["objproxy"]
    assert s.policy() == "obj-priority"  # type: ignore[attr-defined]


def test_obj_priority_page_load_bytes_match_decisions() -> None:
    """A generated page in Chromium through `obj-priority` (root): Chromium's own
    `priority` headers reach the proxy (some requests are u=0, most are not), every
    answered request was decided once, and each channel carried exactly the bytes of the
    objects decided for it."""
    from conftest import require_binaries, require_root

    require_root()
    require_binaries("chanemu", "webreplay", "objproxy")
    from dchlab.workloads import api

    spec = api.RunSpec(scheme="obj-priority", hbc="embb", llc="urllc")
    (row,) = api.pageload(spec, "synthetic:1:1", pages=["site0"], timeout_s=60)
    assert row["valid"], row["invalid_reason"]
    st = row["stats"]["proxy"]["objproxy"]
    assert st["policy"] == "obj-priority" and st["probes"] == 0
    llc, hbc = st["channels"]["llc"], st["channels"]["hbc"]
    # The document and the render-blocking CSS at least are u=0; images and scripts not.
    assert llc["decisions"].get("highest_priority", 0) >= 2, llc
    assert set(llc["decisions"]) == {"highest_priority"}, llc
    assert hbc["decisions"].get("lower_priority", 0) >= 10, hbc
    assert set(hbc["decisions"]) == {"lower_priority"}, hbc
    for ch in (llc, hbc):
        assert ch["body_bytes"] == ch["decided_bytes"] > 0, ch
    decided = llc["decided_objects"] + hbc["decided_objects"]
    assert decided + st["upstream_errors"] == st["client_requests"], st
    # What the LLC link carried includes those bodies (plus TLS, headers, DNS).
    assert row["bytes_llc"] >= llc["body_bytes"]
