"""What webreplay can serve: the same rules its parsers apply, checked before it runs.

One rule per field, mirrored from the Rust side so a corpus is refused at import (and by
`dch corpus info --verify`) instead of aborting every testbed later:

- host names: `validate_name` in crates/webreplay/src/hosts.rs (the hosts-file parser);
  the contract test (tests/test_pages_import_robust.py) feeds the same names to
  `webreplay --check` and to `host_name_problem`;
- header names and values: `http::HeaderName::from_bytes` (RFC 9110 token characters,
  stored lower case) and `http::HeaderValue::from_str` (visible ASCII and tab) in
  crates/webreplay/src/corpus.rs.
"""

from __future__ import annotations

import ipaddress
import re

# RFC 9110 §5.6.2 tchar: what http::HeaderName accepts (after lower-casing).
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9a-z]+$")


def host_name_problem(name: str) -> str | None:
    """Why webreplay's hosts parser would refuse `name` (None: it accepts it).

    Same checks, same order as hosts.rs `validate_name` (applied to the lower-cased name).
    """
    name = name.lower()
    if len(name.encode("utf-8", "surrogateescape")) > 253:
        return "longer than 253 characters"
    try:
        ipaddress.ip_address(name)
        return "expected a host name, got an address"
    except ValueError:
        pass
    if any(
        not label or len(label.encode("utf-8", "surrogateescape")) > 63 for label in name.split(".")
    ):
        return "empty or over-long label (expected dot-separated labels of 1-63 characters)"
    if not all(c.isascii() and (c.isalnum() or c in "-._") for c in name):
        return "contains characters other than letters, digits, '-', '_' and '.'"
    return None


def header_problem(name: str, value: str) -> str | None:
    """Why webreplay would refuse the response header `name: value` (None: it accepts it)."""
    if not _TOKEN.match(name.lower()):
        return f"invalid header name {name!r} (expected RFC 9110 token characters)"
    if any(not (c == "\t" or 0x20 <= ord(c) < 0x7F) for c in value):
        return f"invalid value of header {name!r}: {value[:60]!r} (expected visible ASCII)"
    return None
