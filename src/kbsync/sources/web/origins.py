"""What a crawl learns once per origin: its robots.txt, its soft-404 fingerprint, its sitemaps.

Many tasks of a crawl ask about the same origin at once; each answer is fetched once,
as a task the others await, and a waiter that is cancelled does not cancel the fetch
the others await.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from kbsync.sources.web.config import WebConfig
from kbsync.sources.web.fetch import Failure, Fetcher, FetchError
from kbsync.sources.web.links import HTML_TYPES, decode_text, parse_html
from kbsync.sources.web.politeness import HostGates
from kbsync.sources.web.robots import ROBOTS_MAX_BYTES, RobotsCache, RobotsPolicy
from kbsync.sources.web.sitemaps import SitemapError, SitemapKind, parse_sitemap
from kbsync.sources.web.soft404 import PROBE_PREFIX, Fingerprint, fingerprint
from kbsync.sources.web.urls import UrlError, canonicalize, host_of, origin_of

__all__ = ["MAX_SITEMAP_FILES", "MAX_SITEMAP_NESTING", "Origins", "SitemapEntry",
           "without_address"]

MAX_SITEMAP_FILES = 100
"""Sitemap files read per crawl at most (an index may name thousands)."""
MAX_SITEMAP_NESTING = 2
"""Levels of sitemap indexes followed below an explicit or robots.txt sitemap."""

SitemapEntry = tuple[str, str | None]
"""A page a sitemap lists: its canonical URL and its ``lastmod``, if it says one."""


class Origins:
    """The robots.txt policy and soft-404 fingerprint of each origin a crawl meets, and the
    pages its sitemaps list.

    ``heard(exc)`` is told of each failed request (did it get an HTTP answer?) and
    ``answered()`` of each answer: what says whether a listing is complete.
    """

    def __init__(self, config: WebConfig, fetcher: Fetcher, gates: HostGates,
                 cache: RobotsCache, agent: str, heard: Callable[[FetchError], None],
                 answered: Callable[[], None]) -> None:
        self._config = config
        self._fetcher = fetcher
        self._gates = gates
        self._cache = cache
        self._agent = agent
        self._heard = heard
        self._answered = answered
        self._robots: dict[str, asyncio.Task[RobotsPolicy]] = {}
        self._probes: dict[str, asyncio.Task[Fingerprint | None]] = {}

    async def robots(self, origin: str) -> RobotsPolicy:
        """The robots.txt policy of ``origin`` (its Crawl-delay slows its host's gate)."""
        task = self._robots.get(origin)
        if task is None:
            task = self._robots[origin] = asyncio.create_task(self._load_robots(origin))
        return await asyncio.shield(task)

    async def soft_404(self, origin: str) -> Fingerprint | None:
        """The fingerprint of what ``origin`` answers, with a 200, to an address that cannot
        exist; None when it answers as it should (or cannot be asked)."""
        task = self._probes.get(origin)
        if task is None:
            task = self._probes[origin] = asyncio.create_task(self._probe(origin))
        return await asyncio.shield(task)

    async def cancel(self) -> None:
        """Stop the fetches still running (the crawl is over)."""
        helpers = [*self._robots.values(), *self._probes.values()]
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)

    async def sitemap_entries(self, warn: Callable[[str], None]) -> list[SitemapEntry]:
        """The in-scope pages the configured sitemaps (and, if asked, those the seeds'
        robots.txt names) list, following sitemap indexes a few levels down; what cannot
        be read is said to ``warn``."""
        config = self._config
        scope = config.scope
        pending: list[tuple[str, int]] = [(u, 0) for u in config.sitemaps]
        if config.use_robots_sitemaps:
            for origin in dict.fromkeys(origin_of(s) for s in config.seeds):
                policy = await self.robots(origin)
                for raw in policy.sitemaps:
                    try:
                        url = canonicalize(raw, base=origin + "/")
                    except UrlError:
                        continue
                    if scope.allows_host(host_of(url)):
                        pending.append((url, 0))
        entries: list[SitemapEntry] = []
        done: set[str] = set()
        while pending and len(done) < MAX_SITEMAP_FILES:
            url, level = pending.pop(0)
            if url in done:
                continue
            done.add(url)
            try:
                response = await self._fetcher.fetch(url)
            except FetchError as exc:
                self._heard(exc)
                warn(f"the sitemap {url} could not be read: {exc.reason}")
                continue
            self._answered()
            if response.status != 200:
                warn(f"the sitemap {url} answered HTTP {response.status}")
                continue
            try:
                sitemap = parse_sitemap(response.body or b"", config.max_decompressed_bytes)
            except SitemapError as exc:
                warn(f"the sitemap {url} was not read: {exc}")
                continue
            for entry in sitemap.entries:
                try:
                    loc = canonicalize(entry.loc, base=response.url)
                except UrlError:
                    continue
                if sitemap.kind is SitemapKind.INDEX:
                    if level < MAX_SITEMAP_NESTING and scope.allows_host(host_of(loc)):
                        pending.append((loc, level + 1))
                elif scope.contains(loc):
                    entries.append((loc, entry.lastmod or None))
        return entries

    async def _load_robots(self, origin: str) -> RobotsPolicy:
        policy = self._cache.get(origin, time.monotonic())
        if policy is None:
            policy = await self._fetch_robots(origin)
            self._cache.put(origin, policy, time.monotonic())
        delay = policy.crawl_delay(self._agent)
        if delay:
            self._gates.slow_down(urlsplit(origin).hostname or "", delay)
        return policy

    async def _fetch_robots(self, origin: str) -> RobotsPolicy:
        try:
            response = await self._fetcher.fetch(
                origin + "/robots.txt", max_bytes=ROBOTS_MAX_BYTES, truncate=True
            )
        except FetchError as exc:
            self._heard(exc)
            if exc.kind is Failure.REDIRECT:
                return RobotsPolicy.allow_all(exc.reason)  # RFC 9309 §2.3.1.2
            return RobotsPolicy.unreachable(exc.reason)
        self._answered()
        return RobotsPolicy.from_response(response.status, response.body or b"")

    async def _probe(self, origin: str) -> Fingerprint | None:
        """Fingerprint of the answer to an address that cannot exist, if that answer is a 200."""
        url = origin + PROBE_PREFIX + secrets.token_hex(8)
        policy = await self.robots(origin)
        if not policy.allows(url, self._agent):
            return None
        try:
            response = await self._fetcher.fetch(
                url, follow=False, media_types=self._config.media_types
            )
        except FetchError:
            return None
        if response.status != 200 or response.body is None:
            return None
        text = decode_text(response.body, response.charset)
        if response.media_type in HTML_TYPES:
            text = parse_html(text).text
        return fingerprint(without_address(text, url))


def without_address(text: str, url: str) -> str:
    """The text without the page's own URL or path: error pages often echo what was asked for."""
    path = urlsplit(url).path
    text = text.replace(url, " ")
    return text.replace(path, " ") if len(path) > 1 else text
