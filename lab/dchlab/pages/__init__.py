"""dchlab.pages: page corpora (format, importers, generator)."""

from __future__ import annotations

from pathlib import Path

from dchlab.pages.corpus import Corpus, CorpusError, load

DEFAULT_SYNTHETIC_PAGES = 20


def parse_synthetic(spec: str, unit: str = "PAGES") -> tuple[int, int] | None:
    """(seed, count) of a `synthetic[:SEED[:COUNT]]` spec (seed 1 and
    DEFAULT_SYNTHETIC_PAGES when left out), None for any other spec. `unit` names
    COUNT in the error (PAGES; SITES for sessions)."""
    if spec != "synthetic" and not spec.startswith("synthetic:"):
        return None
    bits = spec.split(":")[1:]
    form = f"synthetic[:SEED[:{unit}]]"
    try:
        seed = int(bits[0]) if bits and bits[0] else 1
        count = int(bits[1]) if len(bits) > 1 else DEFAULT_SYNTHETIC_PAGES
    except ValueError as e:
        raise CorpusError(f"corpus {spec!r}: expected {form} with integers") from e
    if count < 1 or len(bits) > 2:
        raise CorpusError(f"corpus {spec!r}: expected {form}, {unit} >= 1")
    return seed, count


def open_corpus(spec: str) -> Corpus:
    """A corpus by name: a corpus directory, `synthetic[:SEED[:PAGES]]` (built-in,
    generated once into the cache), `tp5n` (real saved pages: $DCH_CORPUS_TP5N or
    ../shared/data/pages/tp5n) or `warc` (real WARC captures: $DCH_CORPUS_WARC or
    ../shared/data/pages/warc), imported once into the cache (dchlab.pages.named)."""
    from dchlab.pages.named import NAMES, open_named

    if spec in NAMES:
        return open_named(spec)
    synthetic = parse_synthetic(spec)
    if synthetic is not None:
        from dchlab.pages.generator import cached

        return cached(*synthetic)
    path = Path(spec)
    if not path.exists():
        raise CorpusError(
            f"corpus {spec!r}: no such directory (give a corpus directory, tp5n or "
            "synthetic[:SEED])"
        )
    return load(path)


__all__ = ["Corpus", "CorpusError", "load", "open_corpus"]
