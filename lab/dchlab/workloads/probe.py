"""Probe a page corpus with a real Chromium (`dch corpus probe`, and the named corpora's
first import in dchlab.pages.named): which requests of each page fail over a local
webreplay — what static analysis of HTML/CSS cannot see (script-made requests, CSS
rules that match nothing). A load failing only those is valid (docs/pages.md).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from dchlab.pages.corpus import Corpus, save

log = logging.getLogger(__name__)


def probe_corpus(corpus: Corpus, pages: list[str] | None = None) -> Corpus:
    """Set each page's `missing` to the failed requests of a real Chromium load over a local
    webreplay; details go to <corpus>/probe.json. Returns `corpus` (saved)."""
    from rich.console import Console
    from rich.progress import Progress

    from dchlab.workloads.localreplay import LocalReplay

    names = pages or [p.name for p in corpus.pages]
    details: dict[str, dict[str, Any]] = {}
    # Progress on stderr: stdout carries the --json rows.
    with LocalReplay(corpus) as lr, Progress(transient=True, console=Console(stderr=True)) as prog:
        task = prog.add_task("probing pages", total=len(names))
        for name in names:
            page = corpus.page(name)
            res = lr.load(page.entry_url)
            before = page.missing_urls
            if res.get("document_error"):
                # The document itself did not load: its failures say nothing about what
                # the corpus lacks. Keep the importer's record and say so.
                log.warning(
                    "%s: probe load failed (%s); missing URLs left as imported",
                    name,
                    res["document_error"],
                )
            else:
                page.missing_urls = sorted({str(u) for u, _ in res.get("failed") or []})
                page.missing = len(page.missing_urls)
            details[name] = {
                "missing_before_probe": before,
                "missing": page.missing,
                "missing_urls": page.missing_urls,
                "failed": res.get("failed", []),
                "valid": res.get("valid"),
                "invalid_reason": res.get("invalid_reason"),
                "plt_ms": res.get("plt_ms"),
                "resources_loaded": res.get("resources_loaded"),
            }
            prog.advance(task)
    save(corpus)
    (corpus.root / "probe.json").write_text(json.dumps(details, indent=1) + "\n")
    return corpus
