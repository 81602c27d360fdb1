"""``WebSource``: a website as a kbsync source (the Source protocol over a crawl)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kbsync.errors import DependencyMissingError, DocumentError

try:
    import httpx
    import protego  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise DependencyMissingError("The web source", "web", exc.name or "httpx", exc) from exc

from kbsync.model import KnownItem, Listing, SourceItem
from kbsync.sources import Revisits
from kbsync.sources.web.config import WebConfig, WebSettings
from kbsync.sources.web.crawler import Crawl, Progress
from kbsync.sources.web.politeness import HostGates
from kbsync.sources.web.robots import RobotsCache

__all__ = ["WebSource"]

T = TypeVar("T")


class WebSource:
    """Pages of one or more websites, found from seeds and sitemaps within a scope.

    ``list(known)`` crawls (see :mod:`kbsync.sources.web.crawler` for what
    each HTTP answer becomes) and keeps the bodies it downloaded, so
    ``read(item)`` of a listed item costs no second request; ``read`` fetches
    again only for an item whose body is not held (each body is handed out
    once, to bound memory). Keys are canonical URLs (:mod:`.urls`).

    Its settings are a :class:`~kbsync.sources.web.config.WebSettings`; besides them:

    - ``clock``: wall-clock seconds since the epoch for the schedules (tests, simulations).
    - ``transport``: an httpx transport (tests, custom TLS); the source never closes it.
    - ``progress(url, done, total)``: called after each page.
    """

    def __init__(
        self,
        settings: WebSettings,
        *,
        name: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = settings.validated()
        seed_urls, sitemap_urls = self._config.seeds, self._config.sitemaps
        self._clock = clock
        self._revisits = Revisits()
        self._name = name or (seed_urls or sitemap_urls)[0]
        self._transport = transport
        self._progress = progress
        # Kept across crawls of this source, each entry at most robots_max_age seconds.
        self._robots = RobotsCache(self._config.robots_max_age)
        self._bodies: dict[str, tuple[str, bytes]] = {}
        self._gates: HostGates | None = None
        self.lastmod_hints: dict[str, str] = {}
        """``<lastmod>`` of each page the last crawl found in a sitemap: a hint, never a gate."""

    @property
    def name(self) -> str:
        """The first seed (or sitemap) URL unless named otherwise."""
        return self._name

    @property
    def config(self) -> WebConfig:
        """The validated settings."""
        return self._config

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """Crawl the site now; ``known`` gives the validators to revalidate with.

        A ``pending`` known item (a page that failed before it was ever stored) is
        tried again as if a seed linked to it.
        """
        return self._list(known, due_only=False)

    def list_due(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """:meth:`list`, but a known page that is not due is listed as unchanged, unrequested.

        Due: its interval since the last check has passed, or a sitemap
        ``<lastmod>`` is after that check, or it has no schedule yet.
        """
        return self._list(known, due_only=True)

    @property
    def revisits(self) -> Revisits:
        """The revisit schedules and counts of the latest listing."""
        return self._revisits

    def _list(self, known: Mapping[str, KnownItem] | None, *, due_only: bool) -> Listing:
        crawl = self._crawl(known, progress=self._progress, due_only=due_only)
        result = _run(crawl.run)
        self._revisits = Revisits(result.schedules, result.checked, result.not_due)
        by_key = {item.key: item for item in result.listing.items}
        self._bodies = {
            key: (by_key[key].locator, body) for key, body in result.bodies.items() if key in by_key
        }
        self.lastmod_hints = result.lastmod
        return result.listing

    def read(self, item: SourceItem) -> bytes:
        """The bytes of a listed item: the body the crawl kept, else fetched again."""
        held = self._bodies.get(item.key)
        if held is not None and held[0] == item.locator:
            del self._bodies[item.key]
            return held[1]
        crawl = self._crawl(None)
        try:
            return _run(lambda: crawl.read(item))
        except DocumentError:
            raise
        except Exception as exc:  # never let a transport's own error escape unnamed
            raise DocumentError(item.locator, f"{type(exc).__name__}: {exc}") from exc

    @property
    def gates(self) -> HostGates | None:
        """The politeness gates of the latest crawl or read (None before the first)."""
        return self._gates

    def _crawl(self, known: Mapping[str, KnownItem] | None,
               progress: Progress | None = None, *, due_only: bool = False) -> Crawl:
        """A crawl that keeps the pauses of the previous one (each runs on a fresh loop)."""
        crawl = Crawl(self._config, self._robots, known, transport=self._transport,
                      progress=progress, after=self._gates, now=self._clock(),
                      due_only=due_only)
        self._gates = crawl.gates
        return crawl

    def __repr__(self) -> str:
        return f"WebSource(name={self._name!r}, seeds={self._config.seeds!r})"


def _run(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion on a fresh event loop, even when called from inside one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    # Inside a running loop (a notebook, an async application) asyncio.run is not
    # allowed: run on a fresh loop in a helper thread and wait for it.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()
