"""The background user: replays page loads at the HTTP level, think times between them.

Runs as its own process on a device (`python -m dchlab.workloads.bgusers.replay`,
started by dchlab.workloads.bgusers.background inside ueK's namespace, so its traffic
goes through that device's client agent like a browser's); it prints READY once set
up. A page load requests every object of the page (dchlab.workloads.bgusers.deps,
precomputed into --plans): the entry document first, each object as soon as its
parent's response has arrived, over TLS with the testbed's CA, with Chromium's request
headers (dchlab.workloads.bgusers.headers), HTTP/2 where the origin offers it (one
connection per origin, multiplexed) and at most 6 parallel HTTP/1.1 connections per
origin otherwise (Chromium's per-host limit). Each page load starts cold (new
connections, as the measured Chromium load does). Each response body is hashed and
compared with the corpus's (content-addressed) body.

One JSON line per finished page goes to --log: page, start (s since the user started),
plt_ms (first request to last response), requests, failed, mismatched, bytes (response
bodies). SIGTERM ends the user at once (a page under way is not logged).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import signal
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx
import numpy as np

from dchlab.workloads.bgusers import think
from dchlab.workloads.bgusers.deps import Request
from dchlab.workloads.bgusers.headers import request_headers

#: Chromium's parallel connections per host over HTTP/1.1.
H1_PER_HOST = 6


@dataclass
class PageResult:
    """One replayed page load (the log line's fields)."""

    page: str
    start: float
    plt_ms: float
    requests: int
    failed: int
    mismatched: int
    bytes: int

    def line(self) -> str:
        return json.dumps(self.__dict__)


async def load_page(
    client: Any,
    requests: list[Request],
    h1_hosts: set[str],
    fetch: Callable[[Any, str, dict[str, str]], Any] | None = None,
) -> tuple[int, int, int]:
    """Request every one of `requests`, each once its parent has answered. A request
    whose transport fails counts as failed with all its descendants (never requested:
    nothing referenced them). Returns (failed, mismatched, body bytes)."""
    children: dict[int, list[int]] = {}
    for i, r in enumerate(requests):
        children.setdefault(r.parent, []).append(i)
    limits: dict[str, asyncio.Semaphore] = {}
    entry = requests[0].url
    counts = {"failed": 0, "mismatched": 0, "bytes": 0}

    async def get(i: int) -> None:
        r = requests[i]
        host = r.url.split("/", 3)[2]
        sem = limits.setdefault(host, asyncio.Semaphore(H1_PER_HOST)) if host in h1_hosts else None
        try:
            async with sem or contextlib.nullcontext():
                resp = await (fetch or _fetch)(client, r.url, request_headers(r.url, entry))
            body = resp.content
            counts["bytes"] += len(body)
            if resp.status_code >= 400:
                counts["failed"] += 1
            elif hashlib.sha256(body).hexdigest() != r.sha256:
                counts["mismatched"] += 1
        except Exception:  # a transport error fails this request and every descendant
            counts["failed"] += 1 + _descendants(children, i)
            return
        await asyncio.gather(*(get(c) for c in children.get(i, [])))

    await asyncio.gather(*(get(c) for c in children.get(-1, [])))
    return counts["failed"], counts["mismatched"], counts["bytes"]


def _descendants(children: dict[int, list[int]], i: int) -> int:
    return sum(1 + _descendants(children, c) for c in children.get(i, []))


async def _fetch(client: Any, url: str, headers: dict[str, str]) -> Any:
    return await client.get(url, headers=headers)


def _client(ca: ssl.SSLContext) -> Any:
    return httpx.AsyncClient(
        http2=True, verify=ca, timeout=httpx.Timeout(60.0), limits=httpx.Limits(max_connections=256)
    )


def draws(
    think_time: think.ThinkTime, rng: np.random.Generator, names: list[str], first_think: bool
) -> Iterator[tuple[float, str]]:
    """The user's (think time s, page) before each page: a think time (0 before the first
    page unless `first_think`), then a page drawn uniformly from `names`. Both clients
    follow it (the Rust one as a schedule file), so they see the same draws."""
    done = 0
    while True:
        wait = think_time.sample(rng) if first_think or done else 0.0
        yield wait, names[int(rng.integers(len(names)))]
        done += 1


async def run_user(
    plans: dict[str, list[Request]],
    h1_hosts: set[str],
    think_time: think.ThinkTime,
    rng: np.random.Generator,
    log: TextIO,
    *,
    max_pages: int | None = None,
    first_think: bool = True,
    ca: ssl.SSLContext | None = None,
) -> int:
    """Think, load a page chosen uniformly at random, repeat (`first_think`: think
    before the first page too) until `max_pages` pages or a SIGTERM. Returns the number
    of pages loaded."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    t0 = time.monotonic()
    done = 0
    ctx = ca or ssl.create_default_context()
    schedule = draws(think_time, rng, sorted(plans), first_think)
    while max_pages is None or done < max_pages:
        wait, page = next(schedule)
        if first_think or done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
        if stop.is_set():
            break
        start = time.monotonic()
        async with _client(ctx) as client:
            task = asyncio.ensure_future(load_page(client, plans[page], h1_hosts))
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                break
            failed, mismatched, nbytes = task.result()
        plt = (time.monotonic() - start) * 1000
        res = PageResult(page, round(start - t0, 3), round(plt, 1), len(plans[page]),
                         failed, mismatched, nbytes)  # fmt: skip
        log.write(res.line() + "\n")
        log.flush()
        done += 1
    return done


def main(argv: list[str] | None = None) -> int:
    from dchlab.workloads.bgusers.deps import from_json

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--plans", type=Path, required=True, help="the pages' requests (deps.plans JSON)"
    )
    p.add_argument("--seed", type=int, default=1, help="seeds page choice and think times")
    p.add_argument("--think", default=think.DEFAULT, help=f"think time (default {think.DEFAULT})")
    p.add_argument("--log", type=Path, required=True, help="JSON lines, one per page")
    p.add_argument("--max-pages", type=int, default=None, help="stop after N pages")
    p.add_argument("--no-first-think", action="store_true", help="load the first page at once")
    p.add_argument("--ca", default=None, help="CA file (default: $SSL_CERT_FILE)")
    a = p.parse_args(argv)
    plans, h1 = from_json(json.loads(a.plans.read_text()))
    ctx = ssl.create_default_context(cafile=a.ca) if a.ca else ssl.create_default_context()
    print("READY", flush=True)  # set up: what follows is the user's traffic
    with a.log.open("a") as log:
        n = asyncio.run(run_user(plans, h1, think.parse(a.think, "--think"), np.random.default_rng(a.seed),
                                 log, max_pages=a.max_pages, first_think=not a.no_first_think,
                                 ca=ctx))  # fmt: skip
    print(f"pages {n}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
