"""Published page loads re-judged under today's validity rule, in memory (issue 36).

The rule changed (dchlab.workloads.validity): a request the replay could not answer
because the corpus lacks it (webreplay's 404, or a name outside the corpus that does not
resolve) is a gap of the recording and no longer invalidates a load. Published rows keep
the verdict they were measured with; this module asks, for every row excluded for
"N unexpected failed resources (first: URL)", whether the row itself proves that the
new rule admits it, and what each paired gain would then be.

A row names only the first of its unexpected URLs (`invalid_reason`) and counts the
rest (`resources_failed_unexpected`); it stores no per-request error. So a load is
admitted only when it had exactly one unexpected failure and the corpus holds no object
that URL could be served from (webreplay's match: `url_match_key` with its query, or
host + path; a host outside the corpus cannot even resolve): that request could only
have been a gap, never a failure of something the corpus holds. A load with more than
one unexpected failure is left invalid (undecidable from the row), as is every other
reason (a document error). Nothing is written: the published files stay as measured.

    cd lab && ../.venv/bin/python -m dchlab.experiments.rejudge [--assume-rest] [campaign ...]
"""

from __future__ import annotations

import argparse
import logging
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dchlab.experiments import analysis as an
from dchlab.experiments.campaign import Campaign, CampaignError, load_campaign
from dchlab.experiments.publish import published_files, read_rows
from dchlab.pages.corpus import Corpus, load
from dchlab.pages.named import NAMES, import_source, source
from dchlab.paths import repo_root
from dchlab.workloads.validity import url_match_key

log = logging.getLogger(__name__)

# judge()'s reason for unexpected failures; the URL may itself hold parentheses.
_REASON = re.compile(r"^(\d+) unexpected failed resources \(first: (.+)\)$")
_NO_RECORD = "; the corpus records no missing URLs"


@dataclass(frozen=True)
class Held:
    """What a corpus can answer: the replay's match keys of its objects, and its hosts."""

    keys: frozenset[str]
    hosts: frozenset[str]

    @classmethod
    def of(cls, corpus: Corpus) -> Held:
        keys = {url_match_key(o.url) for o in corpus.objects}
        keys |= {url_match_key(o.url, with_query=False) for o in corpus.objects}
        return cls(frozenset(keys), frozenset(h.lower() for h in corpus.all_hosts()))

    def holds(self, url: str) -> bool:
        """Could the replay serve `url` (exactly, or by its host + path fallback)?"""
        return url_match_key(url) in self.keys or url_match_key(url, False) in self.keys

    def host_known(self, url: str) -> bool:
        return (urlsplit(url.strip()).hostname or "").lower() in self.hosts


@dataclass(frozen=True)
class Rejudged:
    """The new rule's verdict on one published invalid load, from its row alone."""

    admitted: bool
    why: str


def rejudge(row: dict[str, Any], held: Held, assume_rest: bool = False) -> Rejudged:
    """Does the new rule admit this invalid row? (module doc: only when the row proves it)

    `assume_rest`: an upper bound, not a verdict — a row with several unexpected failures
    is admitted when the one it names is a gap, taking the unnamed ones for gaps too."""
    reason = str(row.get("invalid_reason") or "").split(_NO_RECORD, 1)[0]
    m = _REASON.match(reason)
    if m is None:
        return Rejudged(False, "not an unexpected-failure exclusion")
    n, url = int(m.group(1)), m.group(2)
    if n != 1 and not assume_rest:
        return Rejudged(False, "undecidable: the row names 1 of its failed URLs")
    if held.holds(url):
        return Rejudged(False, "a URL the corpus holds failed")
    assumed = " (assumed for the unnamed others)" if n != 1 else ""
    if not held.host_known(url):
        return Rejudged(True, "gap: host outside the corpus (does not resolve)" + assumed)
    return Rejudged(True, "gap: the corpus lacks the URL (webreplay 404)" + assumed)


def rejudged_rows(
    rows: Iterable[dict[str, Any]], held: Held, assume_rest: bool = False
) -> tuple[list[dict[str, Any]], Counter[tuple[str, str]]]:
    """Copies of `rows` with the admitted loads valid (their one failure counted in
    `missing_unrecorded`), and a count of every invalid row's verdict per (page, why)."""
    out: list[dict[str, Any]] = []
    verdicts: Counter[tuple[str, str]] = Counter()
    for r in rows:
        if r.get("valid", True) or not an.is_measurement(r):
            out.append(r)
            continue
        v = rejudge(r, held, assume_rest)
        verdicts[(an.item_of(r), v.why)] += 1
        if v.admitted:
            r = {**r, "valid": True, "invalid_reason": "", "resources_failed_unexpected": 0}
            r["missing_unrecorded"] = 1
        out.append(r)
    return out, verdicts


@dataclass(frozen=True)
class Move:
    """One paired gain (condition, scheme against the baseline) before and after."""

    condition: str
    arm: str
    before: an.Gain
    after: an.Gain

    @property
    def points(self) -> float:
        return self.after.gain_pct.mean - self.before.gain_pct.mean


def moves(
    before: Sequence[dict[str, Any]],
    after: Sequence[dict[str, Any]],
    base: str = "all-hbc",
    metric: str = "plt_ms",
) -> list[Move]:
    """The paired gains (the report's own `paired_gains`; the campaign's baseline and
    metric) on both row sets, wherever the pages or pairs used differ."""
    g0 = an.paired_gains(before, metric=metric, baseline=base)
    g1 = an.paired_gains(after, metric=metric, baseline=base)
    out = []
    for key in sorted(g1):
        b = g0.get(key)
        if b is not None and (b.pairs, b.pages) != (g1[key].pairs, g1[key].pages):
            out.append(Move(key[0], key[1], b, g1[key]))
    return out


def held_by(c: Campaign) -> Held:
    """What the campaign's corpus holds: an imported corpus read as it is, a named source
    imported afresh into a temporary directory, removed again (no probe needed)."""
    name = c.workload.corpus or ""
    src = source(name) if name in NAMES else Path(name)
    if (src / "manifest.json").is_file():
        return Held.of(load(src))
    with tempfile.TemporaryDirectory(prefix=f"rejudge-{name}-") as tmp:
        return Held.of(import_source(name, src, Path(tmp) / "corpus"))


def report(
    c: Campaign, rows: list[dict[str, Any]], held: Held, assume_rest: bool = False
) -> list[str]:
    """Markdown lines: the invalid rows' verdicts, then every gain that moved."""
    after, verdicts = rejudged_rows(rows, held, assume_rest)
    admitted = sum(1 for a, b in zip(rows, after, strict=True) if a is not b)
    invalid = sum(1 for r in rows if not r.get("valid", True) and an.is_measurement(r))
    bound = " (upper bound: unnamed failures taken for gaps)" if assume_rest else ""
    lines = [f"### {c.name}: {admitted} of {invalid} invalid loads admitted{bound}", ""]
    lines += [f"- {page}: {n} × {why}" for (page, why), n in sorted(verdicts.items())]
    lines += ["", "| condition | scheme | gain % before | after | Δ points | pages / pairs |"]
    lines.append("|---|---|---|---|---|---|")
    base = str(c.analysis.get("baseline", "all-hbc"))
    for m in moves(rows, after, base, str(c.analysis.get("metric", "plt_ms"))):
        b, a = m.before, m.after
        lines.append(
            f"| {m.condition} | {m.arm} | {b.gain_pct.fmt(1, '%')} | {a.gain_pct.fmt(1, '%')} "
            f"| {m.points:+.1f} | {b.pages} / {b.pairs} → {a.pages} / {a.pairs} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "campaigns",
        nargs="*",
        metavar="CAMPAIGN",
        help="a published campaign's name, e.g. fig3_warc "
        "(default: every published file with an invalid load)",
    )
    ap.add_argument(
        "--assume-rest",
        action="store_true",
        help="upper bound: a row's unnamed unexpected failures are gaps when its named one is",
    )
    args = ap.parse_args(argv)
    wanted = set(args.campaigns)
    for path in published_files():
        name = path.name.removesuffix(".parquet")
        if wanted and name not in wanted:
            continue
        rows = read_rows(path)
        if not any(not r.get("valid", True) and an.is_measurement(r) for r in rows):
            continue
        try:
            c = load_campaign(repo_root() / "experiments" / f"{name}.yaml", check_channels=False)
        except CampaignError as e:
            log.warning("%s: %s", name, e)
            continue
        print("\n".join(report(c, rows, held_by(c), args.assume_rest)) + "\n")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    raise SystemExit(main())
