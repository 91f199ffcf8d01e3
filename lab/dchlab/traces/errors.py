"""The one error type every trace and profile parser raises.

It names the file, the line (when the input has lines) and the field, and says
what was expected, so a user can fix the input without reading our code.
"""

from __future__ import annotations

from pathlib import Path

from dchlab.errors import UserError


class TraceFormatError(UserError, ValueError):
    """Malformed trace or profile input."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        where = self.path if line is None else f"{self.path}:{line}"
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {message}")
