"""Named real-page corpora, imported once: `tp5n` (a saved-page tree) and `warc` (a
folder of WARC captures, one page each).

Campaigns say `corpus: tp5n` or `corpus: warc`; the name means `$DCH_CORPUS_TP5N` /
`$DCH_CORPUS_WARC` when set, else `../shared/data/pages/tp5n` / `.../warc` beside the
repository (`dchlab.paths.shared_data`). The path may be the source (a tp5n tree; a
folder of `*.warc` / `*.warc.gz`, imported here) or an already imported corpus
directory (used as it is). A source is imported once into
`.cache/corpora/<name>-<fingerprint>/`: the fingerprint covers every file's path and
content and `IMPORT_VERSION`, so an edited tree (or an importer whose output changed
and says so) gives a fresh import and an unchanged one is reused — also when the tree
was copied afresh (new mtimes: a new machine, a re-provisioned ../shared). After the import, when this process can (root,
Chromium, webreplay), every page is probed once (`dch corpus probe`), so the corpus
records the requests a real Chromium fails and loads failing only those are valid.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
from pathlib import Path

from dchlab.pages.corpus import FORMAT, Corpus, CorpusError, load
from dchlab.paths import cache_dir, shared_data

log = logging.getLogger(__name__)

TP5N_ENV = "DCH_CORPUS_TP5N"
WARC_ENV = "DCH_CORPUS_WARC"
NAMES = ("tp5n", "warc")
_ENV = {"tp5n": TP5N_ENV, "warc": WARC_ENV}
# Bump when the importer's output changes (skips, URL mapping, manifest fields): cached
# imports made by older code are then redone. (Not a hash of the code: a comment edit
# should not cost a 3-minute import and probe.)
IMPORT_VERSION = 3


def source(name: str) -> Path:
    """Where the named corpus comes from: its environment variable, else
    ../shared/data/pages/<name>."""
    env = os.environ.get(_ENV[name])
    if env:
        return Path(env)
    data = shared_data()
    if data is not None:
        return data / "pages" / name
    from dchlab.paths import repo_root

    return repo_root().parent / "shared" / "data" / "pages" / name


def tp5n_source() -> Path:
    return source("tp5n")


def fingerprint(src: Path) -> str:
    """sha256 over every file's relative path and content, and IMPORT_VERSION.

    Content, not mtime: a page set copied afresh (same bytes, new mtimes) must reuse its
    import and probe (a probe costs minutes). Hashing is cheap beside that: tp5n's 68 MB
    take ~0.2 s."""
    h = hashlib.sha256(f"{FORMAT} import v{IMPORT_VERSION}\n".encode())
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for f in sorted(filenames):
            p = Path(dirpath) / f
            try:
                with open(p, "rb") as fh:
                    digest = hashlib.file_digest(fh, "sha256").digest()
            except OSError:
                continue  # a broken link or unreadable file: the importer skips it too
            rel = os.fsencode(p.relative_to(src))
            h.update(rel + b"\0" + digest)
    return h.hexdigest()


def _probe_possible() -> str | None:
    """Why this process cannot probe (None: it can)."""
    from dchlab.paths import target_dir
    from dchlab.workloads.browser import CHROMIUM

    if os.geteuid() != 0:
        return "not root"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    if not (target_dir() / "release" / "webreplay").exists():
        return "webreplay not built"
    return None


_WHAT = {
    "tp5n": "saved-page tree (<site>/<host>/<path>, as `dch corpus import-tp5n` takes)",
    "warc": "folder of WARC captures (*.warc, *.warc.gz; one page each, as `dch corpus "
    "import-warc` takes)",
}


def open_tp5n() -> Corpus:
    return open_named("tp5n")


def open_named(name: str) -> Corpus:
    """The named corpus (NAMES), imported and probed on first use."""
    src = source(name)
    if not src.is_dir():
        raise CorpusError(
            f"no {name} corpus at {src}. Put the pages there (../shared/data/pages/{name} "
            f"beside the repository) or set {_ENV[name]} to a {_WHAT[name]} or to an "
            "imported corpus directory; or use `corpus: synthetic` in the campaign"
        )
    if (src / "manifest.json").is_file():
        return load(src)
    root = cache_dir() / "corpora"
    root.mkdir(parents=True, exist_ok=True)
    dest = root / f"{name}-{fingerprint(src)[:16]}"
    # One importer at a time (a campaign's workers may all ask at once); the others wait
    # and then find the finished import.
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".complete").is_file():
            return load(dest)
        _import(name, src, dest)
        return load(dest)


def import_source(name: str, src: Path, tmp: Path) -> Corpus:
    """Import the named corpus' source `src` into `tmp` (no probe: objects and hosts)."""
    if name == "warc":
        from dchlab.pages.warc import import_warc

        files = sorted(p for p in src.iterdir() if p.name.endswith((".warc", ".warc.gz")))
        if not files:
            raise CorpusError(f"{src}: no *.warc or *.warc.gz file to import")
        corpus, _ = import_warc(files, tmp, name="warc")
        return corpus
    from dchlab.pages.tp5n import import_tp5n

    corpus, _ = import_tp5n(src, tmp)
    return corpus


def _import(name: str, src: Path, dest: Path) -> None:
    tmp = dest.with_name(dest.name + ".tmp")
    log.warning("importing %s into %s (once; reused until the source changes)", src, dest)
    corpus = import_source(name, src, tmp)
    why = _probe_possible()
    if why is None:
        from dchlab.workloads.probe import probe_corpus

        log.warning(
            "probing %d pages with Chromium (what each page cannot load)", len(corpus.pages)
        )
        probe_corpus(corpus)
    else:
        log.warning(
            "not probing %s (%s): validity is judged against the importer's static analysis "
            "of missing files; `dch corpus probe %s` as root records what Chromium fails",
            dest,
            why,
            dest,
        )
    (tmp / ".complete").write_text(f"{src}\n")
    if dest.exists():
        shutil.rmtree(dest)
    tmp.replace(dest)
    # Earlier imports of the same name are stale now (the tree or the importer changed).
    for old in dest.parent.glob(f"{name}-*"):
        if old != dest and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
