"""Byte sizes as users write them (`dch bulk --size`, campaign `workload.sizes`).

`500`, `10KB`, `1.5MB`, `1GB` are decimal (1 KB = 1000 B, as the paper counts);
`KiB`, `MiB`, `GiB` are binary; the `B` is optional and case does not matter.
"""

from __future__ import annotations

import re

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.I)
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9}
_UNITS |= {"gb": 10**9, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
EXPECTED = "a number of bytes with an optional unit B, KB, MB, GB, KiB, MiB, GiB (e.g. 10KB)"


def parse_size(value: str | int) -> int:
    """Bytes in `value` (a string as above, or a positive int); ValueError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and (m := _SIZE_RE.match(value)):
        unit = m.group(2).lower()
        if unit not in _UNITS:
            raise ValueError(
                f"bad size {value!r}: unknown unit {m.group(2)!r}; expected {EXPECTED}"
            )
        n = int(float(m.group(1)) * _UNITS[unit])
    else:
        raise ValueError(f"bad size {value!r}: expected {EXPECTED}")
    if n < 1:
        raise ValueError(f"bad size {value!r}: must be at least 1 byte")
    return n


def is_uint(text: str) -> bool:
    """`text` is ASCII digits only (`str.isdigit` also takes "²" and "٣", which int()
    then refuses or reads as another number)."""
    return text.isascii() and text.isdigit()


def format_size(n: int) -> str:
    """The shortest decimal form of `n` bytes (`10KB`, `1MB`, `1500B`): campaign item names."""
    for unit, mult in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n}B"
