"""What an importer must not hand to the replay: OS litter, dotfiles, undecodable names.

Real saved-page trees come from people's machines: Finder leaves `.DS_Store` and `._*`
AppleDouble files, Explorer `Thumbs.db` and `desktop.ini`, people keep them in git. None
of it is part of a page (other dot-names are: they stay), and a litter *folder* taken for a host name used to make
webreplay refuse the whole hosts file. Importers ask `litter_reason` about every entry
and record each skip in a `Skips` (a logged warning naming the file, and a count).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

log = logging.getLogger(__name__)

# Lower-case names of files and folders operating systems and tools drop into trees.
# Only these dot-names: other ones are real URL paths (typepad serves `/.shared:v.../`,
# sites serve `/.well-known/`), and a dot-name where a host folder belongs is refused by
# the host-name rule anyway.
OS_LITTER = frozenset(
    {
        ".ds_store",
        ".git",
        ".gitignore",
        ".gitattributes",
        ".svn",
        ".hg",
        ".trashes",
        ".spotlight-v100",
        ".fseventsd",
        ".temporaryitems",
        ".localized",
        ".appledouble",
        ".directory",
        "thumbs.db",
        "ehthumbs.db",
        "ehthumbs_vista.db",
        "desktop.ini",
        "icon\r",
        "__macosx",
        "$recycle.bin",
        "system volume information",
    }
)


def litter_reason(name: str) -> str | None:
    """Why the file or folder `name` is not page content (None: it may be)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        # os.fsdecode keeps undecodable bytes as surrogates: no URL can name this file.
        return "file name is not valid UTF-8"
    if name.startswith("._"):
        return "macOS AppleDouble file (._*)"
    if name.lower() in OS_LITTER or name.startswith("~$"):
        return "operating-system, version-control or editor litter"
    return None


class Skips:
    """Counted, logged skips of one import."""

    def __init__(self) -> None:
        self.by_reason: Counter[str] = Counter()
        self.files: list[tuple[str, str]] = []  # (path, reason)

    def add(self, path: Path | str, reason: str, files: int = 1) -> None:
        """Record one skipped entry; `files`: how many files a skipped folder held."""
        shown = str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        held = f" ({files} files)" if files != 1 else ""
        log.warning("skipped %s%s: %s", shown, held, reason)
        self.by_reason[reason] += 1
        self.files.append((shown, reason))

    @property
    def total(self) -> int:
        """Entries skipped (a folder counts once)."""
        return sum(self.by_reason.values())

    def summary(self) -> str:
        return ", ".join(f"{n} {why}" for why, n in self.by_reason.most_common())
