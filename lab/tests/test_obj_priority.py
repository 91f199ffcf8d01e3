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
