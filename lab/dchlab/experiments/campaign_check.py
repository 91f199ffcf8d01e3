"""Validating campaign files: the error type and the checks that name the file and the
field (`conditions[2].hbc`) in every message (dchlab.experiments.campaign_file and the
workload kinds' parsers use them)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from dchlab import units
from dchlab.errors import UserError

#: Names of campaigns, scheme labels and conditions.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=:-]*$")


class CampaignError(UserError, ValueError):
    """A campaign file that does not follow the schema."""


def parse_size(value: Any, where: str) -> int:
    """A campaign size (dchlab.units.parse_size: `10KB`, `1MiB`, or a byte count)."""
    try:
        return units.parse_size(value)
    except (ValueError, TypeError) as exc:
        raise CampaignError(f"{where}: {exc}") from None


class Validator:
    """Validation helpers that prefix every error with the file name."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def err(self, where: str, msg: str) -> CampaignError:
        return CampaignError(f"{self.path}: {where}: {msg}")

    def mapping(self, v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.err(where, f"expected a mapping, got {type(v).__name__}")
        return v

    def string(self, v: Any, where: str) -> str:
        if not isinstance(v, str) or not v.strip():
            raise self.err(where, f"expected a non-empty string, got {v!r}")
        return v

    def name(self, v: Any, where: str) -> str:
        s = self.string(v, where)
        if not NAME_RE.match(s) or "|" in s:
            raise self.err(where, f"expected a name of letters, digits and _.+=:- , got {s!r}")
        return s

    def pos_int(self, v: Any, where: str) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise self.err(where, f"expected a positive integer, got {v!r}")
        return v

    def number(self, v: Any, where: str, minimum: float = 0.0) -> float:
        ok = isinstance(v, int | float) and not isinstance(v, bool)
        if not ok or not math.isfinite(v) or v < minimum:
            raise self.err(where, f"expected a finite number >= {minimum}, got {v!r}")
        return float(v)

    def boolean(self, v: Any, where: str) -> bool:
        if not isinstance(v, bool):
            raise self.err(where, f"expected true or false, got {v!r}")
        return v

    def args(self, v: Any, where: str) -> tuple[str, ...]:
        if v is None:
            return ()
        if isinstance(v, str):
            return tuple(v.split())
        if isinstance(v, list) and all(isinstance(a, str | int | float) for a in v):
            return tuple(str(a) for a in v)
        raise self.err(where, f"expected a list of command-line arguments, got {v!r}")

    def unknown(self, d: dict[str, Any], allowed: set[str], where: str) -> None:
        extra = sorted(set(d) - allowed)
        if extra:
            raise self.err(
                f"{where}.{extra[0]}" if where else extra[0],
                f"unknown field (expected one of: {', '.join(sorted(allowed))})",
            )

    def pages(self, raw: Any, where: str) -> int | tuple[str, ...] | None:
        """A page count or a list of page names (None when absent)."""
        if raw is None:
            return None
        if isinstance(raw, int) and not isinstance(raw, bool):
            return self.pos_int(raw, where)
        if isinstance(raw, list) and raw:
            return tuple(self.string(p, f"{where}[{i}]") for i, p in enumerate(raw))
        raise self.err(where, f"expected a page count or a list of page names, got {raw!r}")


def check_channel(v: Validator, spec: str, where: str) -> None:
    """Validate a channel spec's grammar and base name without building any trace.

    Uses the traces helper's parser (`dchlab.traces.profiles.parse_spec`) for the
    modifiers; the base must be a built-in, `fixed:<rtt>ms/<rate>mbit`, a scenario
    name, an existing profile file (relative to the campaign file or the cwd) or
    `cellreplay:DIR` with an existing DIR (its files are read when the run resolves it).
    """
    from dchlab.traces import builtin, cellreplay_profile, profiles

    try:
        parsed = profiles.parse_spec(spec)
    except ValueError as e:
        raise v.err(where, str(e)) from e
    base = parsed.base
    if cellreplay_profile.is_cellreplay_spec(base):
        try:  # its directory must be there (an unset variable says where traces go)
            cellreplay_profile.spec_dir(base, check=False)
        except ValueError as e:
            raise v.err(where, str(e)) from e
        return
    try:  # the one channel-name grammar (traces/builtin.py), as chanemu reads it
        fixed = builtin.parse_builtin(base)
    except ValueError as e:
        raise v.err(where, str(e)) from e
    ok = (
        base in profiles.known_channels()
        or fixed is not None
        or Path(base).is_file()
        or (v.path.parent / base).is_file()
    )
    if not ok:
        raise v.err(
            where,
            f"unknown channel {base!r}: expected {', '.join(profiles.known_channels())}, "
            f"{builtin.FIXED_SYNTAX} (rate may be `unlimited`) or the path of a profile TOML",
        )
