"""One crawl of a web source: what is there now, checked against what the store remembers.

The crawl is a breadth-first walk (lowest depth first) from the seeds and
the pages the sitemaps list, by up to ``max_connections`` workers at once,
each request passing its host's politeness gate. Links are taken from
``<a href>`` of HTML pages only, and followed when inside the scope and no
deeper than ``max_depth``. At most ``max_pages`` pages are fetched.

Then every known page that no link led to is checked as well (conditionally,
without following its links): a page that lost its last link may still
exist, and only the server can say it is gone. Outcomes:

======================================  ===========================================
answer                                  in the listing
======================================  ===========================================
200                                     an item with its body (kept for ``read``)
304 to a conditional request            an item with ``not_modified=True``
301/308 (then 200 or 304)               an item under the new key; the old key is
                                        absent, so the engine sees a move
302/303/307                             the item keeps the requested key
410                                     absent: deleted
404, soft 404                           ``ItemError(missing=True)``; absent (deleted)
                                        when the store already counted one miss
disallowed by robots.txt, out of scope  absent: the source no longer covers it
robots.txt unreachable (5xx, network)   ``ItemError`` for known pages and seeds
timeouts, resets, truncation, 5xx, 429  ``ItemError`` after up to three attempts
                                        (:mod:`.retries`): the stored version is kept
caps, redirect loops, refused address   ``ItemError`` naming the URL
not reached within ``max_pages``        ``ItemError`` for known pages
media type not accepted                 absent
not due (``due_only``), known           an item with ``not_modified=True``, unrequested
======================================  ===========================================

Errors other than a 200 after a permanent redirect are reported under the
key that was requested, so the stored document stays. A page that failed
before it was ever stored comes back as a ``pending`` known item (the store's
frontier) and is tried again, as if a seed linked to it, so it is not lost
while the pages that link to it answer 304. When no request of
the crawl got any HTTP answer (the site is down, the network is out), the
listing is incomplete (``complete=False``) and nothing is deleted.

Every page that answers moves on its revisit schedule (:mod:`kbsync.core.schedule`):
a 304, or a 200 whose bytes hash as before, is an unchanged check; other 200s
are changes. With ``due_only`` a known page that is not due (and that no
sitemap ``<lastmod>`` after its last check names) is not requested at all:
it is listed as unchanged, its links are not followed this time, and new
links on the pages that are fetched still are.
"""

from __future__ import annotations

import asyncio
import itertools
import mimetypes
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

import httpx

from kbsync.core.identity import page_digest
from kbsync.core.schedule import after_check, is_due
from kbsync.errors import DocumentError
from kbsync.model import ItemError, KnownItem, Listing, PageSchedule, SourceItem, Validators
from kbsync.sources.web.config import WebConfig
from kbsync.sources.web.fetch import (
    REDIRECT_STATUSES,
    RETRY_STATUSES,
    Failure,
    Fetcher,
    FetchError,
    Response,
)
from kbsync.sources.web.links import HTML_TYPES, decode_text, parse_html, resolve_links
from kbsync.sources.web.origins import Origins, without_address
from kbsync.sources.web.politeness import Clock, HostGates
from kbsync.sources.web.retries import is_transient_status
from kbsync.sources.web.robots import (
    RobotsCache,
    RobotsPolicy,
    RobotsState,
    product_token,
)
from kbsync.sources.web.sitemaps import lastmod_seconds
from kbsync.sources.web.soft404 import fingerprint
from kbsync.sources.web.urls import UrlError, canonicalize, host_of, origin_of, port_of

__all__ = ["Crawl", "CrawlResult", "Progress"]


Progress = Callable[[str, int, int], None]
"""Called after each page with its URL, the pages checked so far and the pages known to check."""

# Errors that mean no HTTP answer came back at all.
_NO_ANSWER = frozenset({Failure.NETWORK, Failure.REFUSED})


class _Via(StrEnum):
    """How a URL entered the crawl."""

    SEED = "seed"
    SITEMAP = "sitemap"
    LINK = "link"
    PENDING = "pending"
    """Found before but not taken (it failed): tried again, its links followed."""
    KNOWN = "known"


@dataclass(frozen=True, slots=True)
class _Task:
    url: str
    depth: int
    via: _Via


@dataclass(frozen=True, slots=True)
class CrawlResult:
    """The listing, the bodies of the pages fetched (by key), and sitemap lastmod hints.

    ``schedules`` is the revisit schedule of every page the listing holds (items
    and errors) after this crawl; ``checked`` counts the pages requested and
    ``not_due`` the known pages left unchecked because they were not due.
    """

    listing: Listing
    bodies: dict[str, bytes] = field(default_factory=dict)
    lastmod: dict[str, str] = field(default_factory=dict)
    schedules: dict[str, PageSchedule] = field(default_factory=dict)
    checked: int = 0
    not_due: int = 0


class Crawl:
    """The state of one crawl (or of one ``read``); used once."""

    def __init__(
        self,
        config: WebConfig,
        robots_cache: RobotsCache,
        known: Mapping[str, KnownItem] | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        progress: Progress | None = None,
        clock: Clock | None = None,
        after: HostGates | None = None,
        now: float | None = None,
        due_only: bool = False,
    ) -> None:
        self._config = config
        # The wall-clock time of this crawl, for the revisit schedules; ``due_only``
        # lists a known page that is not due as unchanged, without a request.
        self._now = time.time() if now is None else now
        self._due_only = due_only
        self._not_due = 0
        self._rescheduled: set[str] = set()
        self._robots_cache = robots_cache
        self._known: Mapping[str, KnownItem] = known or {}
        self._schedules: dict[str, PageSchedule] = {
            k: v.schedule for k, v in self._known.items() if v.schedule is not None}
        self._transport = transport
        self._progress = progress
        self._agent = product_token(config.user_agent)
        self._gates = HostGates(config.per_host_connections, config.delay, clock)
        if after is not None:  # the previous crawl of the same source: its pauses still hold
            self._gates.continue_from(after)
        self._fetcher = Fetcher(config, self._gates, transport)
        self._queue: asyncio.PriorityQueue[tuple[int, int, _Task]] = asyncio.PriorityQueue()
        self._order = itertools.count()
        self._seen: set[str] = set()
        self._items: dict[str, SourceItem] = {}
        self._errors: dict[str, ItemError] = {}
        self._bodies: dict[str, bytes] = {}
        self._lastmod: dict[str, str] = {}
        self._warnings: list[str] = []
        self._origins = Origins(config, self._fetcher, self._gates, robots_cache, self._agent,
                                self._heard, self._heard_answer)
        self._pages = 0
        self._answered = False
        self._unanswered = False
        self._cap_warned = False
        self._unreachable_warned: set[str] = set()

    @property
    def gates(self) -> HostGates:
        """The politeness gates of this crawl's hosts."""
        return self._gates

    # -- the crawl ----------------------------------------------------------------------------

    async def run(self) -> CrawlResult:
        """Crawl, then check the known pages no link reached; the listing and the bodies."""
        self._robots_cache.forget_failures()
        async with self._fetcher:
            try:
                for seed in self._config.seeds:
                    self._enqueue(seed, 0, _Via.SEED)
                self._enqueue_pending()
                await self._read_sitemaps()
                workers = [
                    asyncio.create_task(self._work()) for _ in range(self._config.max_connections)
                ]
                try:
                    await self._queue.join()
                    self._enqueue_known()
                    await self._queue.join()
                finally:
                    for worker in workers:
                        worker.cancel()
                    await asyncio.gather(*workers, return_exceptions=True)
            finally:
                await self._origins.cancel()
        # Pages left for later (not due) need no answer: only a request that got none
        # makes the listing incomplete.
        complete = self._answered or (self._not_due > 0 and not self._unanswered)
        if not complete:
            self._warnings.append(
                "no request got an HTTP answer: the listing is incomplete, so nothing is deleted"
            )
        listing = Listing(
            items=tuple(self._items[k] for k in sorted(self._items)),
            complete=complete,
            errors=tuple(self._errors[k] for k in sorted(self._errors)),
            warnings=tuple(self._warnings),
        )
        # A page absent from a complete listing is gone, and so is its schedule.
        schedules = {k: v for k, v in self._schedules.items()
                     if not complete or k in self._items or k in self._errors}
        return CrawlResult(listing, dict(self._bodies), dict(self._lastmod), schedules,
                           self._pages, self._not_due)

    async def read(self, item: SourceItem) -> bytes:
        """The body of one item, fetched again (with the same checks as a crawl)."""
        async with self._fetcher:
            try:
                url = canonicalize(item.locator)
                if not self._config.scope.contains(url):
                    raise FetchError(url, "outside the allowed scope", Failure.SCOPE)
                policy = await self._origins.robots(origin_of(url))
                if not policy.allows(url, self._agent):
                    raise FetchError(url, _robots_refusal(policy), Failure.ROBOTS)
                response = await self._fetcher.fetch(url, on_hop=self._check_hop)
            except UrlError as exc:
                raise DocumentError(item.locator, str(exc)) from exc
            except FetchError as exc:
                raise DocumentError(item.locator, exc.reason) from exc
            finally:
                await self._origins.cancel()
        if response.status not in (200, 203) or response.body is None:
            raise DocumentError(item.locator, f"HTTP {response.status} from {response.url}")
        return response.body

    def _enqueue(self, url: str, depth: int, via: _Via) -> None:
        if url in self._seen or depth > self._config.max_depth:
            return
        if self._pages >= self._config.max_pages and url not in self._known:
            self._note_cap()
            return  # it could not be fetched anyway
        self._seen.add(url)
        self._queue.put_nowait((depth, next(self._order), _Task(url, depth, via)))

    def _enqueue_pending(self) -> None:
        # Where it was linked from is not remembered: it is tried as if a seed linked it.
        depth = min(1, self._config.max_depth)
        for key in sorted(k for k, known in self._known.items() if known.pending):
            try:
                url = canonicalize(key)
            except UrlError:
                continue
            self._enqueue(url, depth, _Via.PENDING)

    def _enqueue_known(self) -> None:
        for key in sorted(self._known):
            try:
                url = canonicalize(key)
            except UrlError:
                continue  # not a URL this source could have made: absent
            # Checked, not expanded: its links were followed when it was still linked.
            self._enqueue(url, self._config.max_depth, _Via.KNOWN)

    async def _work(self) -> None:
        while True:
            _, _, task = await self._queue.get()
            try:
                await self._visit(task)
            except Exception as exc:  # a bug must not lose the listing: report it on the page
                self._error(task.url, f"unexpected {type(exc).__name__} while checking: {exc}")
            finally:
                self._queue.task_done()

    async def _visit(self, task: _Task) -> None:
        url = task.url
        config = self._config
        if not config.scope.contains(url):
            if task.via is _Via.SEED:
                self._warnings.append(f"the seed {url} is outside the allowed scope: not fetched")
            return  # a known page out of scope is absent: the source no longer covers it
        refusal = config.addresses.host_refusal(host_of(url), port_of(url))
        if refusal is not None:
            self._error(url, f"{url}: address refused: {refusal}")
            return
        if self._left_for_later(url):
            return
        if self._pages >= config.max_pages:
            self._not_checked(url)
            return
        origin = origin_of(url)
        policy = await self._origins.robots(origin)
        if policy.state is RobotsState.UNREACHABLE:
            self._robots_unreachable(task, origin, policy)
            return
        if not policy.allows(url, self._agent):
            if task.via is _Via.SEED:
                self._warnings.append(f"robots.txt of {origin} disallows the seed {url}")
            return  # absent: see the module doc
        self._pages += 1
        try:
            response = await self._fetch_page(url)
        except FetchError as exc:
            self._heard(exc)
            self._error(url, str(exc))
        else:
            self._answered = True
            await self._record(task, response)
        self._report_progress(url)

    def _heard(self, exc: FetchError) -> None:
        """Note whether a failed request got an HTTP answer (the listing's completeness)."""
        if exc.kind in _NO_ANSWER:
            self._unanswered = True
        else:
            self._answered = True

    def _heard_answer(self) -> None:
        """Note that a request got an HTTP answer."""
        self._answered = True

    async def _read_sitemaps(self) -> None:
        for loc, lastmod in await self._origins.sitemap_entries(self._warnings.append):
            if lastmod:
                self._lastmod[loc] = lastmod
            self._enqueue(loc, 0, _Via.SITEMAP)

    def _left_for_later(self, url: str) -> bool:
        """With ``due_only``, list a known page that is not due as unchanged, unrequested.

        Not checked is not gone: it keeps its stored version and its schedule.
        """
        known = self._known.get(url)
        if not self._due_only or known is None or known.pending or known.missing:
            return False  # a 404 waiting for its confirmation is checked again at once
        schedule = known.schedule
        if schedule is None or not schedule.media_type:
            return False  # never scheduled: due
        hint = self._lastmod.get(url)
        lastmod = lastmod_seconds(hint) if hint else None
        if is_due(schedule, self._now, self._config.cadence, lastmod):
            return False
        self._not_due += 1
        self._put(SourceItem(url, url, schedule.media_type, validators=known.validators,
                             not_modified=True))
        return True

    def _checked(self, key: str, body: bytes | None, media_type: str | None) -> None:
        """Advance the schedule of a page that answered: ``body`` None for a 304 (unchanged)."""
        if key in self._rescheduled:
            return  # reached twice (a redirect and a link): the first answer stands
        self._rescheduled.add(key)
        old = self._schedules.get(key)
        digest = None if body is None else page_digest(body)
        changed = digest is not None and (old is None or old.digest != digest)
        if old is not None and body is None and old.media_type:
            media_type = None  # a 304 rarely says its type: keep the one the page last gave
        self._schedules[key] = after_check(old, self._now, changed, self._config.cadence,
                                           digest=digest, media_type=media_type)

    async def _fetch_page(self, url: str) -> Response:
        if self._config.head_mode and self._validators_for(url) is not None:
            head = await self._fetcher.fetch(
                url, method="HEAD", validators_for=self._validators_for, on_hop=self._check_hop
            )
            if head.status == 304:
                return head
        return await self._fetcher.fetch(
            url,
            validators_for=self._validators_for,
            on_hop=self._check_hop,
            media_types=self._config.media_types,
        )

    def _validators_for(self, key: str) -> Validators | None:
        if self._config.revalidate_all:
            return None
        known = self._known.get(key)
        if known is None or known.validators is None:
            return None
        v = known.validators
        return v if v.etag or v.last_modified else None

    async def _check_hop(self, target: str) -> None:
        """Stop a redirect at a refused address, outside the scope, or where robots.txt says no."""
        refusal = self._config.addresses.host_refusal(host_of(target), port_of(target))
        if refusal is not None:
            raise FetchError(
                target, f"a redirect leads here, to a refused address: {refusal}", Failure.REFUSED
            )
        if not self._config.scope.contains(target):
            raise FetchError(
                target, "a redirect leads here, outside the allowed scope", Failure.SCOPE
            )
        policy = await self._origins.robots(origin_of(target))
        if not policy.allows(target, self._agent):
            raise FetchError(
                target, f"a redirect leads here, but {_robots_refusal(policy)}", Failure.ROBOTS
            )

    # -- outcomes -----------------------------------------------------------------------------

    async def _record(self, task: _Task, response: Response) -> None:
        status = response.status
        if status in (200, 203):
            await self._record_page(task, response)
        elif status == 304:
            if not response.conditional:
                self._error(task.url, f"{response.url}: HTTP 304 to an unconditional request")
                return
            known = self._known.get(response.key)
            old = known.validators if known is not None else None
            new = response.validators
            validators = Validators(
                (new.etag if new else None) or (old.etag if old else None),
                (new.last_modified if new else None) or (old.last_modified if old else None),
            )
            media_type = _media_type_of_304(response)
            self._put(
                SourceItem(
                    response.key,
                    response.url,
                    media_type,
                    validators=validators,
                    not_modified=True,
                )
            )
            self._checked(response.key, None, media_type)
        elif status == 410:
            return  # gone: absent, so the engine deletes it
        elif status == 404:
            self._missing(
                task.url,
                f"HTTP 404: {response.url} was not found; deleted if the next check confirms it",
            )
        elif status in RETRY_STATUSES or status >= 500 or is_transient_status(status):
            self._error(task.url, f"{response.url}: {_unavailable(response)}")
        elif status in REDIRECT_STATUSES:
            self._error(task.url, f"{response.url}: HTTP {status} without a usable Location")
        else:
            self._error(
                task.url, f"{response.url}: HTTP {status}; the stored version (if any) is kept"
            )

    async def _record_page(self, task: _Task, response: Response) -> None:
        accepted = self._config.media_types
        if accepted is not None and response.media_type not in accepted:
            if task.via is _Via.SEED:
                self._warnings.append(
                    f"the seed {task.url} is {response.media_type}, not an accepted media type"
                )
            return
        body = response.body or b""
        is_html = response.media_type in HTML_TYPES
        page = parse_html(decode_text(body, response.charset)) if is_html else None
        if self._config.soft_404_check and (is_html or response.media_type.startswith("text/")):
            probe = await self._origins.soft_404(origin_of(response.url))
            text = page.text if page is not None else decode_text(body, response.charset)
            if probe is not None and probe.matches(
                fingerprint(without_address(text, response.url))
            ):
                self._missing(
                    task.url,
                    f"soft 404: {response.url} answers 200 but says what the site says for an "
                    "address that does not exist; deleted if the next check confirms it",
                )
                return
        # The charset parameter travels with the media type, so the extractor can use
        # the header's label between the byte order mark and the page's own <meta>.
        media_type = response.media_type
        if response.charset:
            media_type = f"{media_type}; charset={response.charset}"
        self._put(SourceItem(response.key, response.url, media_type,
                             validators=response.validators), body)
        self._checked(response.key, body, media_type)
        self._seen.add(response.key)
        if page is not None and task.depth < self._config.max_depth:
            for link in resolve_links(page, response.url):
                if self._config.scope.contains(link):
                    self._enqueue(link, task.depth + 1, _Via.LINK)

    def _put(self, item: SourceItem, body: bytes | None = None) -> None:
        if item.key in self._items:
            return  # reached twice (a redirect and a link): the first answer stands
        self._errors.pop(item.key, None)
        self._items[item.key] = item
        if body is not None:
            self._bodies[item.key] = body

    def _error(self, key: str, message: str, *, missing: bool = False) -> None:
        if key not in self._items and key not in self._errors:
            self._errors[key] = ItemError(key, message, missing=missing)

    def _missing(self, key: str, message: str) -> None:
        known = self._known.get(key)
        if known is not None and known.missing >= 1:
            return  # the second miss in a row: absent, so the engine deletes it
        self._error(key, message, missing=True)

    def _note_cap(self) -> None:
        if not self._cap_warned:
            self._cap_warned = True
            self._warnings.append(
                f"max_pages={self._config.max_pages} reached: further pages were not fetched"
            )

    def _not_checked(self, url: str) -> None:
        self._note_cap()
        if url in self._known:
            self._error(
                url,
                f"{url}: not checked, max_pages={self._config.max_pages} was reached first; "
                "the stored version is kept",
            )

    def _robots_unreachable(self, task: _Task, origin: str, policy: RobotsPolicy) -> None:
        if origin not in self._unreachable_warned:
            self._unreachable_warned.add(origin)
            self._warnings.append(
                f"robots.txt of {origin} could not be read ({policy.reason}): "
                "nothing there was fetched"
            )
        if task.via is _Via.SEED or task.url in self._known:
            self._error(
                task.url,
                f"{task.url}: not checked, robots.txt of {origin} could not be read "
                f"({policy.reason}); the stored version is kept",
            )

    def _report_progress(self, url: str) -> None:
        if self._progress is None:
            return
        try:
            self._progress(url, self._pages, min(self._config.max_pages, len(self._seen)))
        except Exception as exc:  # the caller's display must not break the crawl
            self._progress = None
            self._warnings.append(f"the progress callback failed and was dropped: {exc!r}")


def _robots_refusal(policy: RobotsPolicy) -> str:
    if policy.state is RobotsState.UNREACHABLE:
        return f"robots.txt could not be read ({policy.reason})"
    return "robots.txt disallows it"


def _unavailable(response: Response) -> str:
    text = f"HTTP {response.status}"
    if response.attempts > 1:
        text += f" on each of {response.attempts} attempts"
    if response.not_retried:
        text += f", {response.not_retried}"
    return text + "; the stored version (if any) is kept"


def _media_type_of_304(response: Response) -> str:
    """A 304 rarely says its Content-Type: then guess from the URL's extension, else HTML."""
    if response.typed:
        return response.media_type
    guessed, _ = mimetypes.guess_type(urlsplit(response.url).path, strict=False)
    return guessed or response.media_type
