"""The crawl: links, scope, caps, robots.txt, politeness, sitemaps, soft 404s, known pages."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import re
import time
from collections.abc import Callable, Iterator

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from kbsync.model import KnownItem, SourceItem, Validators
from kbsync.sources.web.crawler import Crawl
from kbsync.sources.web.robots import RobotsCache
from tests.fixtures.web.servers import (
    Answer,
    KeepAliveServer,
    StampedHandler,
    reset,
    serving,
    web_source,
)


@pytest.fixture(scope="module")
def shared_server() -> Iterator[HTTPServer]:
    with serving(threaded=True) as s:
        yield s


@pytest.fixture
def server(shared_server: HTTPServer) -> HTTPServer:
    # One server per module (stopping one takes half a second), cleared for each test.
    return reset(shared_server)


def _html(*links: str, text: str = "") -> str:
    return text + "".join(f'<a href="{link}">{link}</a>' for link in links)


def _site(server: HTTPServer, pages: dict[str, str]) -> None:
    for path, html in pages.items():
        server.expect_request(path).respond_with_data(html, content_type="text/html")


def _paths(server: HTTPServer) -> list[str]:
    return [r.path for r, _ in server.log if r.path != "/robots.txt"]


def _base(server: HTTPServer) -> str:
    return server.url_for("/").removesuffix("/")


def _keys(server: HTTPServer, items: tuple[SourceItem, ...]) -> set[str]:
    prefix = _base(server)
    return {item.key.removeprefix(prefix) for item in items}


def test_links_are_followed_within_the_scope_only(server: HTTPServer) -> None:
    _site(
        server,
        {
            "/docs/": _html("a", "/docs/b?utm_source=nav", "/blog/x", "http://example.org/docs/"),
            "/docs/a": _html("/docs/", "b#frag"),
            "/docs/b": "b",
            "/blog/x": "blog",
        },
    )
    listing = web_source(server.url_for("/docs/"), path_prefixes=("/docs/",)).list()
    assert _keys(server, listing.items) == {"/docs/", "/docs/a", "/docs/b"}
    assert sorted(_paths(server)) == ["/docs/", "/docs/a", "/docs/b"]  # each page once
    assert listing.complete


def test_links_are_not_followed_past_max_depth(server: HTTPServer) -> None:
    _site(server, {"/": _html("/1"), "/1": _html("/2"), "/2": _html("/3"), "/3": "end"})
    listing = web_source(server.url_for("/"), max_depth=2).list()
    assert _keys(server, listing.items) == {"/", "/1", "/2"}


def test_the_crawl_stops_at_max_pages_breadth_first(server: HTTPServer) -> None:
    _site(
        server,
        {"/": _html("/a", "/b"), "/a": _html("/a1"), "/b": _html("/b1"), "/a1": "", "/b1": ""},
    )
    listing = web_source(server.url_for("/"), max_pages=3).list()
    assert _keys(server, listing.items) == {"/", "/a", "/b"}
    assert any("max_pages=3 reached" in w for w in listing.warnings)


def test_known_pages_no_link_reaches_are_still_revalidated(server: HTTPServer) -> None:
    orphan = server.url_for("/orphan")
    handler = StampedHandler(
        lambda r: (
            Response(status=304)
            if r.headers.get("If-None-Match") == '"o1"'
            else Response("orphan", content_type="text/html")
        )
    )
    server.expect_request("/orphan").respond_with_handler(handler)
    _site(server, {"/": "no links any more"})
    known = {orphan: KnownItem(orphan, validators=Validators('"o1"'))}
    listing = web_source(server.url_for("/")).list(known)
    assert {i.key: i.not_modified for i in listing.items} == {
        server.url_for("/"): False,
        orphan: True,
    }
    assert handler.requests[0].headers["If-None-Match"] == '"o1"'


def test_known_pages_beyond_max_pages_are_kept_as_errors(server: HTTPServer) -> None:
    _site(server, {"/": _html("/a"), "/a": ""})
    known = {server.url_for("/later"): KnownItem(server.url_for("/later"))}
    listing = web_source(server.url_for("/"), max_pages=2).list(known)
    [error] = listing.errors
    assert error.key == server.url_for("/later")
    assert "not checked" in error.message
    assert "/later" not in _paths(server)


def test_robots_txt_disallow_is_respected_and_a_disallowed_seed_warns(server: HTTPServer) -> None:
    server.expect_request("/robots.txt").respond_with_data(
        "User-agent: *\nDisallow: /private\n", content_type="text/plain"
    )
    _site(server, {"/": _html("/private/x", "/public"), "/public": "", "/private/x": "secret"})
    listing = web_source(server.url_for("/")).list()
    assert _keys(server, listing.items) == {"/", "/public"}
    assert "/private/x" not in _paths(server)

    warned = web_source(server.url_for("/private/x")).list()
    assert warned.items == ()
    assert any("disallows the seed" in w for w in warned.warnings)


def test_a_known_page_robots_txt_now_disallows_is_absent(server: HTTPServer) -> None:
    server.expect_request("/robots.txt").respond_with_data("User-agent: kbsync\nDisallow: /old\n")
    _site(server, {"/": "", "/old": "still here"})
    old = server.url_for("/old")
    listing = web_source(server.url_for("/")).list({old: KnownItem(old)})
    assert _keys(server, listing.items) == {"/"}
    assert listing.errors == ()
    assert "/old" not in _paths(server)


@pytest.mark.parametrize("status", [500, 503])
def test_a_5xx_robots_txt_disallows_all_but_deletes_nothing(
    server: HTTPServer, status: int
) -> None:
    server.expect_request("/robots.txt").respond_with_data("down", status=status)
    _site(server, {"/": _html("/a"), "/a": ""})
    known = server.url_for("/a")
    listing = web_source(server.url_for("/")).list({known: KnownItem(known)})
    assert listing.items == ()
    assert _paths(server) == []
    assert {e.key for e in listing.errors} == {server.url_for("/"), known}
    assert all("robots.txt" in e.message and not e.missing for e in listing.errors)
    assert any(f"HTTP {status}" in w for w in listing.warnings)


def test_robots_txt_is_fetched_once_per_crawl_and_reused_by_the_next(server: HTTPServer) -> None:
    server.expect_request("/robots.txt").respond_with_data("User-agent: *\nAllow: /\n")
    _site(server, {"/": _html("/a", "/b"), "/a": "", "/b": ""})
    source = web_source(server.url_for("/"))
    source.list()
    source.list()
    assert [r.path for r, _ in server.log].count("/robots.txt") == 1


def test_crawl_delay_spaces_requests_to_a_host(server: HTTPServer) -> None:
    server.expect_request("/robots.txt").respond_with_data("User-agent: *\nCrawl-delay: 0.3\n")
    handler = StampedHandler(lambda r: Response(_html("/1", "/2", "/3"), content_type="text/html"))
    server.expect_request(re.compile(r"^/\d?$")).respond_with_handler(handler)
    source = web_source(server.url_for("/"), delay=0.01, per_host_connections=2)
    crawl = Crawl(source.config, RobotsCache(60.0))
    asyncio.run(crawl.run())
    assert len(handler.stamps) == 4
    # What the gate let happen, on its own clock: robots.txt, then four pages, each sent at
    # least the Crawl-delay after the one before (the server's arrival times jitter under load).
    sends = list(crawl.gates.get("127.0.0.1").sends)
    assert len(sends) == 5
    assert min(b - a for a, b in itertools.pairwise(sends)) >= 0.3


def test_at_most_per_host_connections_requests_run_at_once(server: HTTPServer) -> None:
    def slow(request: Request) -> Response:
        time.sleep(0.15)
        links = [f"/p{i}" for i in range(6)] if request.path == "/" else []
        return Response(_html(*links), content_type="text/html")

    handler = StampedHandler(slow)
    server.expect_request(re.compile(r"^/(p\d)?$")).respond_with_handler(handler)
    web_source(server.url_for("/"), delay=0.0, per_host_connections=2, max_connections=8).list()
    assert len(handler.stamps) == 7
    assert handler.most_active == 2


def test_sitemaps_add_pages_and_robots_txt_names_them(server: HTTPServer) -> None:
    base = _base(server)
    server.expect_request("/robots.txt").respond_with_data(f"Sitemap: {base}/index.xml\n")
    server.expect_request("/index.xml").respond_with_data(
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{base}/pages.xml.gz</loc></sitemap></sitemapindex>",
        content_type="application/xml",
    )
    server.expect_request("/pages.xml.gz").respond_with_data(
        gzip.compress(
            (
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{base}/deep/page</loc><lastmod>2024-05-01</lastmod></url>"
                "<url><loc>http://elsewhere.example/x</loc></url>"
                "</urlset>"
            ).encode()
        ),
        content_type="application/gzip",
    )
    _site(server, {"/": "home, no links", "/deep/page": "only the sitemap knows me"})
    source = web_source(server.url_for("/"))
    listing = source.list()
    assert _keys(server, listing.items) == {"/", "/deep/page"}
    assert source.lastmod_hints == {f"{base}/deep/page": "2024-05-01"}


def test_an_explicit_sitemap_is_a_seed_list(server: HTTPServer) -> None:
    base = _base(server)
    server.expect_request("/sitemap.txt").respond_with_data(f"{base}/a\n{base}/b\n")
    _site(server, {"/a": "", "/b": ""})
    listing = web_source([], sitemaps=[server.url_for("/sitemap.txt")]).list()
    assert _keys(server, listing.items) == {"/a", "/b"}


def test_a_soft_404_is_reported_like_a_404(server: HTTPServer) -> None:
    not_found = "<h1>Oops</h1><p>We could not find {path}. Try the search or the home page.</p>"
    server.expect_request(re.compile(r"^/kbsync-soft-404-check-[0-9a-f]+$")).respond_with_handler(
        lambda r: Response(not_found.format(path=r.path), content_type="text/html")
    )
    server.expect_request("/deleted").respond_with_data(
        not_found.format(path="/deleted"), content_type="text/html"
    )
    _site(server, {"/": _html("/deleted", "/real"), "/real": "<p>A real page with content.</p>"})
    source = web_source(server.url_for("/"), soft_404_check=True)
    listing = source.list()
    assert _keys(server, listing.items) == {"/", "/real"}
    [error] = listing.errors
    assert error.key == server.url_for("/deleted")
    assert error.missing
    assert error.message.startswith("soft 404")
    probes = [p for p in _paths(server) if p.startswith("/kbsync-soft-404-check-")]
    assert len(probes) == 1

    deleted = server.url_for("/deleted")
    confirmed = source.list({deleted: KnownItem(deleted, missing=1)})
    assert confirmed.errors == ()
    assert _keys(server, confirmed.items) == {"/", "/real"}


def test_progress_is_reported_after_each_page(server: HTTPServer) -> None:
    _site(server, {"/": _html("/a"), "/a": ""})
    calls: list[tuple[str, int, int]] = []
    web_source(server.url_for("/"), progress=lambda *a: calls.append(a)).list()
    assert [c[1] for c in calls] == [1, 2]
    assert calls[0][0] == server.url_for("/")
    assert all(total >= done for _, done, total in calls)


def test_a_crawl_reuses_its_connections_to_a_host() -> None:
    # Pages, dead links (404 pages with a body nobody needs) and images (skipped unread):
    # every answer must leave its connection fit for the next request.
    links = "".join(f'<a href="/p{i}">p</a><a href="/gone{i}">g</a><a href="/img{i}">i</a>'
                    for i in range(10))
    routes: dict[str, Callable[[dict[str, str]], Answer]] = {
        "/": lambda _: (200, {}, links.encode())
    }
    for i in range(10):
        routes[f"/p{i}"] = lambda _: (200, {}, b"<p>a page</p>")
        routes[f"/img{i}"] = lambda _: (200, {"Content-Type": "image/png"}, b"\x89PNG" * 800)
    with KeepAliveServer(routes) as site:
        web_source(site.url("/"), delay=0.0, per_host_connections=2, soft_404_check=True).list()
    assert len(site.requests) >= 32  # robots.txt, a probe, 31 pages
    # At most the two connections the host is allowed (a few more only if one idled out).
    assert site.connections <= 4


def test_a_revalidating_crawl_reuses_its_connections_across_304_answers() -> None:
    def page(i: int) -> Callable[[dict[str, str]], Answer]:
        etag = f'"v{i}"'

        def answer(headers: dict[str, str]) -> Answer:
            if headers.get("if-none-match") == etag:
                return 304, {"ETag": etag}, b""
            return 200, {"ETag": etag}, f"<p>page {i}</p>".encode()

        return answer

    routes = {f"/p{i}": page(i) for i in range(30)}
    routes["/"] = lambda _: (200, {}, "".join(f'<a href="/p{i}">p</a>' for i in range(30)).encode())
    with KeepAliveServer(routes) as site:
        source = web_source(site.url("/"), delay=0.0, per_host_connections=2)
        first = source.list()
        known = {i.key: KnownItem(i.key, validators=i.validators) for i in first.items}
        opened = site.connections
        second = source.list(known)
    assert sum(i.not_modified for i in second.items) == 30
    assert site.connections - opened <= 4


def test_the_crawl_delay_holds_between_a_crawl_and_the_reads_after_it(server: HTTPServer) -> None:
    server.expect_request("/robots.txt").respond_with_data("User-agent: *\nCrawl-delay: 0.3\n")
    server.expect_request("/").respond_with_data(_html("/a"), content_type="text/html")
    server.expect_request("/a").respond_with_data("a page", content_type="text/html")
    source = web_source(server.url_for("/"), delay=0.01)
    listing = source.list()
    page = next(i for i in listing.items if i.key.endswith("/a"))
    source.read(page)  # the body the crawl kept: no request
    source.read(page)  # fetched again, each read on a loop of its own
    source.read(page)
    assert _paths(server).count("/a") == 3
    assert source.gates is not None
    sends = list(source.gates.get("127.0.0.1").sends)
    assert len(sends) == 5  # robots.txt, /, /a, and /a twice more
    assert min(b - a for a, b in itertools.pairwise(sends)) >= 0.3
