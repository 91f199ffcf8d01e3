"""The channel names chanemu builds itself: `urllc`, `embb`, `fixed:<rtt>ms/<rate>mbit`.

The one Python copy of chanemu's grammar (crates/chanemu/src/profile.rs,
`Profile::builtin`); lab/tests/test_channel_grammar.py feeds the same names to both
and checks that they accept, refuse and read them alike. Rules, as chanemu has them:
names are case-sensitive; anything starting with `fixed:` is meant as a built-in, so a
malformed one is an error, not a file name; numbers use Rust's `f64` syntax (`1e3`,
`.5`, `5.` are fine, `1_000` and spaces are not); the RTT is finite and ≥ 0; the rate
is finite and > 0, or `unlimited`.

Built-in names carry no faults; outages and loss bursts live in a profile's
`<direction>.faults` table, whose Python rules are dchlab.traces.faults (checked
against chanemu by the same test).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

BUILTINS = {"urllc": "fixed:5ms/2mbit", "embb": "fixed:40ms/200mbit"}
FIXED_SYNTAX = "fixed:<rtt>ms/<rate>mbit"  # <rate> may also be `unlimited`
PREFIX = "fixed:"
# Rust's f64 grammar (core::str::FromStr for f64): what chanemu's `.parse()` takes.
_RUST_F64 = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.I)


@dataclass(frozen=True)
class Fixed:
    """A parsed built-in: RTT (ms) and rate per direction (Mbit/s; None = unlimited)."""

    rtt_ms: float
    rate_mbit: float | None

    def spec(self) -> str:
        """The `fixed:` name chanemu reads back as this channel."""
        rate = "unlimited" if self.rate_mbit is None else f"{_num(self.rate_mbit)}mbit"
        return f"{PREFIX}{_num(self.rtt_ms)}ms/{rate}"


def _num(x: float) -> str:
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def rust_f64(text: str) -> float | None:
    """`text` as Rust's `f64::from_str` reads it (None when it refuses it)."""
    return float(text) if _RUST_F64.fullmatch(text) else None


def parse_builtin(name: str) -> Fixed | None:
    """`name` as chanemu's built-in, or None when it is not one (a file path, a
    scenario, ...). A malformed `fixed:` name raises ValueError saying what is wrong."""
    spec = BUILTINS.get(name, name)
    if not spec.startswith(PREFIX):
        return None

    def bad(what: str) -> ValueError:
        return ValueError(
            f"built-in channel {name!r}: {what}; expected {FIXED_SYNTAX}, e.g. fixed:40ms/200mbit"
        )

    rtt_text, slash, rate_text = spec[len(PREFIX) :].partition("/")
    if not slash:
        raise bad("missing `/`")
    if not rtt_text.endswith("ms"):
        raise bad("RTT must end in `ms`")
    rtt = rust_f64(rtt_text[: -len("ms")])
    if rtt is None:
        raise bad("RTT is not a number")
    if not (math.isfinite(rtt) and rtt >= 0):
        raise bad("RTT must be ≥ 0")
    if rate_text == "unlimited":
        return Fixed(rtt, None)
    if not rate_text.endswith("mbit"):
        raise bad("rate must end in `mbit` (or be `unlimited`)")
    rate = rust_f64(rate_text[: -len("mbit")])
    if rate is None:
        raise bad("rate is not a number")
    if not (math.isfinite(rate) and rate > 0):
        raise bad("rate must be > 0")
    return Fixed(rtt, rate)
