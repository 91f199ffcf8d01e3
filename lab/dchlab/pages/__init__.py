"""dchlab.pages: page corpora (format, importers, generator)."""

from __future__ import annotations

from pathlib import Path

from dchlab.pages.corpus import Corpus, CorpusError, load

DEFAULT_SYNTHETIC_PAGES = 20


def open_corpus(spec: str) -> Corpus:
    """A corpus by name: a corpus directory, `synthetic[:SEED[:PAGES]]` (built-in,
    generated once into the cache), or `tp5n` (real saved pages: $DCH_CORPUS_TP5N or
    ../shared/data/pages/tp5n, imported once into the cache; dchlab.pages.named)."""
    if spec == "tp5n":
        from dchlab.pages.named import open_tp5n

        return open_tp5n()
    if spec == "synthetic" or spec.startswith("synthetic:"):
        from dchlab.pages.generator import cached

        bits = spec.split(":")[1:]
        try:
            seed = int(bits[0]) if bits and bits[0] else 1
            pages = int(bits[1]) if len(bits) > 1 else DEFAULT_SYNTHETIC_PAGES
        except ValueError as e:
            raise CorpusError(
                f"corpus {spec!r}: expected synthetic[:SEED[:PAGES]] with integers"
            ) from e
        if pages < 1 or len(bits) > 2:
            raise CorpusError(f"corpus {spec!r}: expected synthetic[:SEED[:PAGES]], PAGES >= 1")
        return cached(seed, pages)
    path = Path(spec)
    if not path.exists():
        raise CorpusError(
            f"corpus {spec!r}: no such directory (give a corpus directory, tp5n or "
            "synthetic[:SEED])"
        )
    return load(path)


__all__ = ["Corpus", "CorpusError", "load", "open_corpus"]
