"""Due-only crawls: only pages whose revisit schedule is due are requested (what the server
saw), the others are listed unchanged and never deleted; new links are still followed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from kbsync.model import KnownItem, Listing
from kbsync.sources.web import WebSource
from tests.fixtures.web.servers import reset, serving, web_source

HOUR = 3_600.0
DAY = 86_400.0


class Site:
    """HTML pages with ETags honouring If-None-Match; the paths it was asked for."""

    def __init__(self) -> None:
        self.pages = {"/": "home", "/a": "page a", "/b": "page b"}
        self.lastmod: dict[str, str] = {}
        self.asked: list[str] = []

    def __call__(self, request: Request) -> Response:
        path = request.path
        if path == "/robots.txt":
            return Response("User-agent: *\nAllow: /\n", content_type="text/plain")
        if path == "/sitemap.xml":
            urls = "".join(
                f"<url><loc>{request.host_url.rstrip('/')}{p}</loc><lastmod>{m}</lastmod></url>"
                for p, m in self.lastmod.items())
            return Response(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                            f"{urls}</urlset>", content_type="application/xml")
        self.asked.append(path)
        if path not in self.pages:
            return Response("not found", status=404)
        links = "".join(f'<a href="{p}">{p}</a>' for p in self.pages if p != path)
        body = f"<html><body><p>{self.pages[path]}</p>{links}</body></html>"
        etag = f'"{abs(hash(body))}"'
        if request.headers.get("If-None-Match") == etag:
            return Response(status=304, headers={"ETag": etag})
        return Response(body, content_type="text/html", headers={"ETag": etag})


@pytest.fixture(scope="module")
def shared_server() -> Iterator[HTTPServer]:
    with serving(threaded=True) as s:
        yield s


@pytest.fixture
def site(shared_server: HTTPServer) -> Site:
    handler = Site()
    reset(shared_server).expect_request("").respond_with_handler(handler)
    return handler


class Clock:
    """Simulated wall-clock time, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _source(server: HTTPServer, clock: Clock, **settings: object) -> WebSource:
    return web_source(server.url_for("/"), clock=clock, min_interval=HOUR, max_interval=DAY,
                      **settings)


def _known(source: WebSource, listing: Listing) -> dict[str, KnownItem]:
    """What a store would remember after this listing."""
    schedules = source.revisits.schedules
    return {i.key: KnownItem(i.key, validators=i.validators, schedule=schedules.get(i.key))
            for i in listing.items}


def _paths(keys: Mapping[str, object] | set[str], server: HTTPServer) -> set[str]:
    base = server.url_for("/").removesuffix("/")
    return {k.removeprefix(base) for k in keys}


def test_only_due_pages_are_requested_and_the_others_are_listed_unchanged(
    shared_server: HTTPServer, site: Site
) -> None:
    clock = Clock()
    source = _source(shared_server, clock)
    first = source.list_due({})  # nothing known: everything is due
    assert sorted(site.asked) == ["/", "/a", "/b"]
    known = _known(source, first)
    assert source.revisits.checked == 3

    site.asked.clear()
    clock.now += HOUR / 2  # before the first interval (min_interval)
    second = source.list_due(known)
    assert site.asked == []
    assert _paths({i.key for i in second.items}, shared_server) == {"/", "/a", "/b"}
    assert all(i.not_modified for i in second.items)
    assert second.complete
    assert not second.errors
    assert (source.revisits.checked, source.revisits.not_due) == (0, 3)
    # Not checked: the schedules are as they were.
    assert source.revisits.schedules == {k: v.schedule for k, v in known.items()}

    clock.now += DAY  # past every interval: all due, each a conditional request
    third = source.list_due(known)
    assert sorted(site.asked) == ["/", "/a", "/b"]
    assert all(i.not_modified for i in third.items)  # 304s
    grown = source.revisits.schedules
    for key, item in known.items():
        assert item.schedule is not None
        assert grown[key].interval > item.schedule.interval
        assert grown[key].checked == clock.now


def test_a_changed_page_gets_a_shorter_interval_and_an_unchanged_one_a_longer(
    shared_server: HTTPServer, site: Site
) -> None:
    clock = Clock()
    source = _source(shared_server, clock)
    known = _known(source, source.list_due({}))
    for _ in range(2):  # unchanged twice: 1 h, 1.5 h, 2.25 h
        clock.now += DAY
        known = _known(source, source.list_due(known))
    site.pages["/a"] = "page a, edited"
    clock.now += DAY
    listing = source.list_due(known)
    schedules = source.revisits.schedules
    base = shared_server.url_for("/").removesuffix("/")
    before = known[base + "/a"].schedule
    assert before is not None
    assert schedules[base + "/a"].interval == pytest.approx(before.interval / 2)
    assert schedules[base + "/a"].changed == clock.now
    assert schedules[base + "/b"].interval > before.interval
    assert {i.key for i in listing.items if not i.not_modified} == {base + "/a"}


def test_a_new_link_on_a_fetched_page_is_followed_while_undue_pages_are_not_requested(
    shared_server: HTTPServer, site: Site
) -> None:
    clock = Clock()
    source = _source(shared_server, clock)
    known = _known(source, source.list_due({}))
    base = shared_server.url_for("/").removesuffix("/")
    # The home page is due again (an earlier check), the others are not.
    home = known[base + "/"]
    assert home.schedule is not None
    known[base + "/"] = KnownItem(home.key, validators=home.validators,
                                  schedule=home.schedule.__class__(
                                      0.0, 0.0, HOUR, home.schedule.digest,
                                      home.schedule.media_type))
    site.pages["/new"] = "a new page"
    site.pages["/"] = "home, now linking to a new page"
    site.asked.clear()
    clock.now += 60.0
    listing = source.list_due(known)
    assert sorted(site.asked) == ["/", "/new"]
    assert _paths({i.key for i in listing.items}, shared_server) == {"/", "/a", "/b", "/new"}
    assert source.revisits.not_due == 2


def test_a_sitemap_lastmod_after_the_last_check_makes_a_page_due(
    shared_server: HTTPServer, site: Site
) -> None:
    clock = Clock()
    source = web_source(shared_server.url_for("/"), clock=clock, min_interval=HOUR,
                        max_interval=DAY, sitemaps=shared_server.url_for("/sitemap.xml"))
    known = _known(source, source.list_due({}))
    site.asked.clear()
    clock.now += 60.0
    # Written after the last check (1,000,000 s after the epoch is 1970-01-12T13:46:40Z).
    site.lastmod = {"/b": "1970-01-12T14:00:00Z", "/a": "1970-01-01"}
    source.list_due(known)
    assert site.asked == ["/b"]


def test_a_full_listing_checks_every_page_whatever_its_schedule(
    shared_server: HTTPServer, site: Site
) -> None:
    clock = Clock()
    source = _source(shared_server, clock)
    known = _known(source, source.list({}))
    site.asked.clear()
    clock.now += 60.0
    source.list(known)
    assert sorted(site.asked) == ["/", "/a", "/b"]


def test_a_page_missing_once_is_checked_again_whatever_its_schedule(
    shared_server: HTTPServer, site: Site
) -> None:
    clock = Clock()
    source = _source(shared_server, clock)
    known = _known(source, source.list_due({}))
    base = shared_server.url_for("/").removesuffix("/")
    a = known[base + "/a"]
    known[base + "/a"] = KnownItem(a.key, validators=a.validators, missing=1,
                                   schedule=a.schedule)
    site.asked.clear()
    clock.now += 60.0
    source.list_due(known)
    assert site.asked == ["/a"]  # so a 404 is confirmed (or cleared) by the server
