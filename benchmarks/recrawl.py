"""Recrawl benchmark: adaptive revisit schedules against fixed-interval recrawl, equal budget.

A threaded HTTP server on 127.0.0.1 serves pages in four groups that change
every hour, day, week, or never (each page at its own phase), with ETags and
304 answers to If-None-Match. Which version a page shows is decided by the
server from a SIMULATED clock that the benchmark advances: nothing waits. The
real :class:`~kbsync.sources.web.WebSource` checks the site every ``--tick``
simulated minutes for ``--days`` simulated days:

- adaptive: ``list_due`` (what ``kbsync sync --due`` and ``kbsync watch`` do),
  bounded by ``min_interval`` 1 hour and ``max_interval`` 7 days;
- fixed: every page every T hours (``list``), with T chosen so the requests
  equal the adaptive run's (equal budget), and T chosen so the staleness
  equals it (equal staleness).

Staleness is measured at the server: each change of a page stays unseen from
the moment the server switched to the new version until the first time it
served that version (or a later one) with a 200; a change still unseen at the
end counts until the end. Requests are page requests the server answered
(robots.txt left out). Target: at the same requests, at least 2x lower
staleness; or at the same staleness, at least 2x fewer requests.

    python benchmarks/recrawl.py                      # 30 days; 4 / 8 / 16 / 32 pages
    python benchmarks/recrawl.py --groups 10,10,10,10 # as many pages of each rate
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kbsync.model import KnownItem, Listing
from kbsync.sources.web import WebSettings, WebSource

__all__ = ["Outcome", "SimulatedSite", "main", "run_policy"]

HOUR = 3_600.0
DAY = 86_400.0
GROUPS: tuple[tuple[str, float | None], ...] = (
    ("hourly", HOUR), ("daily", DAY), ("weekly", 7 * DAY), ("never", None))
EPOCH = 1_700_000_000.0
"""Simulated time 0 (any moment would do: the schedules see seconds since the epoch)."""


@dataclass
class Clock:
    """The simulated wall clock shared by the server and the source."""

    now: float = EPOCH

    def __call__(self) -> float:
        return self.now


@dataclass
class SimulatedSite:
    """Pages with known change periods and phases; what was served, and when."""

    clock: Clock
    per_group: tuple[int, ...]
    seed: int = 7
    pages: dict[str, tuple[str, float | None, float]] = field(default_factory=dict)
    """path -> (group, period in seconds or None, phase in seconds)."""
    served: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    """path -> (simulated time, version) of each 200 answer."""
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        for (group, period), count in zip(GROUPS, self.per_group, strict=True):
            for i in range(count):
                phase = rng.uniform(0, period) if period else 0.0
                self.pages[f"/{group}/{i}"] = (group, period, phase)

    def version(self, path: str, at: float) -> int:
        """The version the page shows at simulated time ``at`` (0 at the start)."""
        _, period, phase = self.pages[path]
        if period is None:
            return 0
        elapsed = at - EPOCH
        return 0 if elapsed < phase else 1 + math.floor((elapsed - phase) / period)

    def change_times(self, path: str, end: float) -> list[tuple[int, float]]:
        """(version, simulated time) of each change after the start, up to ``end``."""
        _, period, phase = self.pages[path]
        if period is None:
            return []
        out = []
        v, t = 1, EPOCH + phase
        while t <= end:
            out.append((v, t))
            v, t = v + 1, t + period
        return out

    def body(self, path: str) -> bytes:
        if path == "/":
            links = "".join(f'<a href="{p}">{p}</a>' for p in self.pages)
            return f"<html><body><h1>Site</h1>{links}</body></html>".encode()
        version = self.version(path, self.clock.now)
        return (f"<html><head><title>{path}</title></head><body><h1>{path}</h1>"
                f"<p>Version {version} of the page {path}.</p></body></html>").encode()

    def handle(self, path: str, if_none_match: str | None) -> tuple[int, bytes, str]:
        if path == "/robots.txt":
            return 200, b"User-agent: *\nAllow: /\n", ""
        if path != "/" and path not in self.pages:
            return 404, b"not found", ""
        body = self.body(path)
        etag = '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'
        with self.lock:
            self.requests += 1
            if if_none_match == etag:
                return 304, b"", etag
            if path != "/":
                self.served.setdefault(path, []).append(
                    (self.clock.now, self.version(path, self.clock.now)))
        return 200, body, etag


@contextmanager
def serving(site: SimulatedSite) -> Iterator[str]:
    """The site on 127.0.0.1 (a free port): its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            status, body, etag = site.handle(self.path, self.headers.get("If-None-Match"))
            self.send_response(status)
            if etag:
                self.send_header("ETag", etag)
            if status != 304:
                kind = "text/plain" if self.path == "/robots.txt" else "text/html"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if status != 304:
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Outcome:
    """What one policy cost and how stale it left the pages."""

    name: str
    requests_per_day: float
    staleness_hours: float
    by_group: dict[str, float]
    """Mean staleness (hours) of the changes of each group."""
    seconds: float


def staleness(site: SimulatedSite, end: float) -> tuple[float, dict[str, float]]:
    """Mean hours a change stayed unseen, over all changes, and per group."""
    delays: dict[str, list[float]] = {}
    for path, (group, _, _) in site.pages.items():
        served = site.served.get(path, [])
        for version, changed in site.change_times(path, end):
            seen = next((t for t, v in served if v >= version and t >= changed), end)
            delays.setdefault(group, []).append(seen - changed)
    every = [d for ds in delays.values() for d in ds]
    return (sum(every) / len(every) / HOUR if every else 0.0,
            {g: sum(ds) / len(ds) / HOUR for g, ds in delays.items()})


def _remember(known: dict[str, KnownItem], listing: Listing, source: WebSource) -> None:
    """What the store keeps after a sync: validators and schedules (errors keep the old)."""
    schedules = source.revisits.schedules
    for item in listing.items:
        old = known.get(item.key)
        known[item.key] = KnownItem(
            item.key, validators=item.validators or (old.validators if old else None),
            schedule=schedules.get(item.key))


def run_policy(name: str, days: float, per_group: tuple[int, ...], tick: float,
               every: float | None) -> Outcome:
    """Check the site every ``tick`` seconds for ``days``: due pages only (``every`` None),
    or every page each ``every`` seconds."""
    clock = Clock()
    site = SimulatedSite(clock, per_group)
    end = EPOCH + days * DAY
    started = time.perf_counter()
    with serving(site) as base:
        source = WebSource(WebSettings(base, allow_private_addresses=("127.0.0.1",),
                                       delay=0.0, soft_404_check=False,
                                       per_host_connections=4, min_interval=HOUR,
                                       max_interval=7 * DAY), clock=clock)
        known: dict[str, KnownItem] = {}
        last_full = -math.inf
        while clock.now <= end:
            listing: Listing | None = None
            if every is None:
                listing = source.list_due(known)
            elif clock.now - last_full >= every - 1e-6:
                listing = source.list(known)
                last_full = clock.now
            if listing is not None:
                _remember(known, listing, source)
            clock.now += tick
    mean, groups = staleness(site, end)
    return Outcome(name, site.requests / days, mean, groups, time.perf_counter() - started)


def _fit(target: float, measure: Callable[[float], float], guess: float, tick: float) -> float:
    """The interval (a multiple of ``tick``) whose staleness comes closest to ``target``.

    ``measure`` grows with the interval; the walk starts at ``guess`` and steps a
    tick at a time until the target lies between two neighbours.
    """
    n = max(1, round(guess / tick))
    seen = {n: measure(n * tick)}
    step = 1 if seen[n] < target else -1
    while n + step >= 1:
        seen[n + step] = measure((n + step) * tick)
        if (seen[n + step] < target) != (seen[n] < target):
            break
        n += step
    return min(seen, key=lambda k: abs(seen[k] - target)) * tick


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--days", type=float, default=30.0, help="simulated days")
    parser.add_argument("--groups", default="4,8,16,32",
                        help="pages changing hourly, daily, weekly, never (comma-separated)")
    parser.add_argument("--tick", type=float, default=60.0, help="simulated minutes per check")
    args = parser.parse_args(argv)
    tick = args.tick * 60.0
    groups = tuple(int(n) for n in args.groups.split(","))
    if len(groups) != len(GROUPS):
        parser.error(f"--groups takes {len(GROUPS)} counts")
    args.per_group = groups
    pages = sum(groups) + 1  # and the home page

    adaptive = run_policy("adaptive (sync --due)", args.days, args.per_group, tick, None)
    # Equal budget: the fixed interval at which every page costs the adaptive run's requests.
    budget_every = max(tick, round(pages * DAY / adaptive.requests_per_day / tick) * tick)
    fixed_budget = run_policy(f"fixed every {budget_every / HOUR:g} h (equal requests)",
                              args.days, args.per_group, tick, budget_every)
    # Equal staleness: the fixed interval whose staleness matches the adaptive run's.
    runs: dict[float, Outcome] = {budget_every: fixed_budget}

    def stale_at(every: float) -> float:
        if every not in runs:
            runs[every] = run_policy(f"fixed every {every / HOUR:g} h", args.days,
                                     args.per_group, tick, every)
        return runs[every].staleness_hours

    # A fixed interval T leaves a change unseen T/2 on average: start the walk there.
    same_every = _fit(adaptive.staleness_hours, stale_at, 2 * adaptive.staleness_hours * HOUR,
                      tick)
    fixed_same = runs[same_every]
    fixed_same = Outcome(f"fixed every {same_every / HOUR:g} h (equal staleness)",
                         fixed_same.requests_per_day, fixed_same.staleness_hours,
                         fixed_same.by_group, fixed_same.seconds)

    print(f"{args.days:g} simulated days, {pages} pages ({' / '.join(map(str, groups))} "
          f"changing hourly / daily / weekly / never, and the home page), a check every "
          f"{args.tick:g} simulated minutes; min_interval 1 h, max_interval 7 d")
    header = (f"{'policy':<38} {'requests/day':>12} {'staleness h':>12} "
              + " ".join(f"{g + ' h':>9}" for g, _ in GROUPS) + f" {'wall s':>7}")
    print(header)
    print("-" * len(header))
    for o in (adaptive, fixed_budget, fixed_same):
        print(f"{o.name:<38} {o.requests_per_day:>12.1f} {o.staleness_hours:>12.2f} "
              + " ".join(f"{o.by_group.get(g, 0.0):>9.2f}" for g, _ in GROUPS)
              + f" {o.seconds:>7.1f}")
    lower = fixed_budget.staleness_hours / adaptive.staleness_hours \
        if adaptive.staleness_hours else math.inf
    fewer = fixed_same.requests_per_day / adaptive.requests_per_day
    print(f"at equal requests: {lower:.1f}x lower staleness; "
          f"at equal staleness: {fewer:.1f}x fewer requests (target: 2x either)")


if __name__ == "__main__":
    main()
