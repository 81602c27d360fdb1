"""What each HTTP answer becomes in the listing, against a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import time
from collections.abc import Callable, Iterator

import brotli  # type: ignore[import-untyped]
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from kbsync.errors import DocumentError, ParameterError
from kbsync.model import KnownItem, SourceItem, Validators
from kbsync.sources import Source
from kbsync.sources.web import WebSettings, WebSource
from tests.fixtures.web.servers import StampedHandler, web_source

LAST_MODIFIED = "Wed, 01 May 2024 10:00:00 GMT"


class _Untyped(Response):
    default_mimetype = None  # no Content-Type header at all


def _known(
    key: str, *, etag: str | None = None, modified: str | None = None, missing: int = 0
) -> dict[str, KnownItem]:
    return {key: KnownItem(key, validators=Validators(etag, modified), missing=missing)}


def test_a_web_source_satisfies_the_source_protocol() -> None:
    assert isinstance(WebSource(WebSettings("http://example.com/")), Source)


def test_the_name_defaults_to_the_first_seed_and_settings_are_checked() -> None:
    assert WebSource(WebSettings("HTTP://Example.com")).name == "http://example.com/"
    assert WebSource(WebSettings("http://example.com/"), name="docs").name == "docs"
    url = "http://example.com/"
    for wrong in ({}, {"urls": "ftp://example.com/"}, {"urls": url, "max_pages": 0},
                  {"urls": url, "user_agent": "bad\r\nX-Injected: 1"},
                  {"urls": url, "allow_private_addresses": ("not-an-address",)}):
        with pytest.raises(ParameterError):
            WebSource(WebSettings(**wrong))  # type: ignore[arg-type]


def test_a_200_is_an_item_with_validators_and_its_body_is_read_without_a_second_request(
    server: HTTPServer,
) -> None:
    server.expect_request("/page").respond_with_data(
        "<p>Hello</p>",
        content_type="text/html; charset=iso-8859-1",
        headers={"ETag": '"v1"', "Last-Modified": LAST_MODIFIED},
    )
    source = web_source(server.url_for("/page"))
    [item] = source.list().items
    assert item == SourceItem(
        server.url_for("/page"),
        server.url_for("/page"),
        "text/html; charset=iso-8859-1",  # the charset travels to the extractor
        validators=Validators('"v1"', LAST_MODIFIED),
        not_modified=False,
    )
    before = len(server.log)
    assert source.read(item) == b"<p>Hello</p>"
    assert len(server.log) == before
    # Handed out once; a second read fetches again.
    assert source.read(item) == b"<p>Hello</p>"
    assert len(server.log) == before + 1


def test_a_page_without_content_type_is_html_and_unaccepted_types_are_skipped(
    server: HTTPServer,
) -> None:
    server.expect_request("/").respond_with_response(
        _Untyped('<a href="/img.png">i</a><a href="/doc.pdf">d</a>')
    )
    server.expect_request("/img.png").respond_with_data(b"\x89PNG", content_type="image/png")
    server.expect_request("/doc.pdf").respond_with_data(b"%PDF-1.4", content_type="application/pdf")
    listing = web_source(server.url_for("/")).list()
    assert {i.key: i.media_type for i in listing.items} == {
        server.url_for("/"): "text/html",
        server.url_for("/doc.pdf"): "application/pdf",
    }


def test_a_304_to_a_conditional_request_is_not_modified_and_needs_no_body(
    server: HTTPServer,
) -> None:
    url = server.url_for("/page")
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        if request.headers.get("If-None-Match") == '"v1"':
            return Response(status=304, headers={"ETag": '"v1"'})
        return Response("body", content_type="text/html", headers={"ETag": '"v1"'})

    server.expect_request("/page").respond_with_handler(handler)
    source = web_source(url)
    [item] = source.list(_known(url, etag='"v1"', modified=LAST_MODIFIED)).items
    assert item.not_modified
    assert item.key == url
    assert item.validators == Validators('"v1"', LAST_MODIFIED)
    assert seen[0].headers["If-None-Match"] == '"v1"'
    assert seen[0].headers["If-Modified-Since"] == LAST_MODIFIED
    assert source._bodies == {}  # nothing downloaded, nothing held


def test_a_304_keeps_known_validators_the_server_did_not_repeat(server: HTTPServer) -> None:
    url = server.url_for("/page.pdf")
    server.expect_request("/page.pdf").respond_with_response(Response(status=304))
    [item] = web_source(url).list(_known(url, modified=LAST_MODIFIED)).items
    assert item.not_modified
    assert item.validators == Validators(None, LAST_MODIFIED)
    assert item.media_type == "application/pdf"  # guessed: a 304 has no Content-Type


def test_head_mode_asks_with_head_first_and_gets_only_when_changed(server: HTTPServer) -> None:
    same, changed = server.url_for("/same"), server.url_for("/changed")

    def respond(request: Request) -> Response:
        if request.headers.get("If-None-Match") == '"v1"':
            return Response(status=304)
        return Response("new", content_type="text/plain", headers={"ETag": '"v2"'})

    server.expect_request("/same").respond_with_handler(respond)
    server.expect_request("/changed").respond_with_handler(respond)
    known = {**_known(same, etag='"v1"'), **_known(changed, etag='"old"')}
    listing = web_source([same, changed], head_mode=True).list(known)
    assert {i.key: i.not_modified for i in listing.items} == {same: True, changed: False}
    methods = [(r.method, r.path) for r, _ in server.log if r.path != "/robots.txt"]
    assert sorted(methods) == [("GET", "/changed"), ("HEAD", "/changed"), ("HEAD", "/same")]


def test_revalidate_all_sends_no_validators(server: HTTPServer) -> None:
    url = server.url_for("/page")
    handler = StampedHandler(lambda r: Response("x", content_type="text/plain"))
    server.expect_request("/page").respond_with_handler(handler)
    [item] = web_source(url, revalidate_all=True).list(_known(url, etag='"v1"')).items
    assert not item.not_modified
    assert "If-None-Match" not in handler.requests[0].headers


@pytest.mark.parametrize("status", [301, 308])
def test_after_a_permanent_redirect_the_key_is_the_new_url(server: HTTPServer, status: int) -> None:
    old, new = server.url_for("/old"), server.url_for("/new")
    server.expect_request("/old").respond_with_data("", status=status, headers={"Location": "/new"})
    server.expect_request("/new").respond_with_data("moved here", content_type="text/plain")
    listing = web_source(old).list(_known(old, etag='"v1"'))
    assert [(i.key, i.locator) for i in listing.items] == [(new, new)]
    assert listing.errors == ()  # the old key simply disappears: the engine sees a move


@pytest.mark.parametrize("status", [302, 303, 307])
def test_after_a_temporary_redirect_the_key_stays_the_requested_url(
    server: HTTPServer, status: int
) -> None:
    old, new = server.url_for("/old"), server.url_for("/elsewhere")
    server.expect_request("/old").respond_with_data(
        "", status=status, headers={"Location": "/elsewhere"}
    )
    server.expect_request("/elsewhere").respond_with_data("here", content_type="text/plain")
    source = web_source(old)
    [item] = source.list().items
    assert (item.key, item.locator) == (old, new)
    assert source.read(item) == b"here"


def test_a_temporary_hop_after_a_permanent_one_keeps_the_permanent_target(
    server: HTTPServer,
) -> None:
    server.expect_request("/a").respond_with_data("", status=301, headers={"Location": "/b"})
    server.expect_request("/b").respond_with_data("", status=302, headers={"Location": "/c"})
    server.expect_request("/c").respond_with_data("c", content_type="text/plain")
    [item] = web_source(server.url_for("/a")).list().items
    assert (item.key, item.locator) == (server.url_for("/b"), server.url_for("/c"))


def test_a_410_page_is_absent_from_the_listing(server: HTTPServer) -> None:
    url = server.url_for("/gone")
    server.expect_request("/gone").respond_with_data("gone", status=410)
    listing = web_source(url).list(_known(url))
    assert listing.items == ()
    assert listing.errors == ()
    assert listing.complete


def test_a_404_is_a_missing_error_first_and_absent_once_confirmed(server: HTTPServer) -> None:
    url = server.url_for("/lost")  # no handler: the server answers 404
    source = web_source(url)
    first = source.list(_known(url, missing=0))
    [error] = first.errors
    assert error.key == url
    assert error.missing
    assert error.message.startswith("HTTP 404")
    assert "deleted if the next check confirms it" in error.message
    second = source.list(_known(url, missing=1))
    assert second.items == ()
    assert second.errors == ()


@pytest.mark.parametrize("status", [500, 502, 503, 429, 403])
def test_server_errors_keep_the_stored_page(server: HTTPServer, status: int) -> None:
    url = server.url_for("/page")
    server.expect_request("/page").respond_with_data("busy", status=status)
    listing = web_source(url).list(_known(url, missing=1))
    [error] = listing.errors
    assert error.key == url
    assert not error.missing
    assert f"HTTP {status}" in error.message
    assert listing.items == ()


def test_retry_after_is_honoured_once_for_503(server: HTTPServer) -> None:
    calls = iter([Response("later", status=503, headers={"Retry-After": "1"})])
    handler = StampedHandler(lambda r: next(calls, Response("ok", content_type="text/plain")))
    server.expect_request("/page").respond_with_handler(handler)
    [item] = web_source(server.url_for("/page")).list().items
    assert item.key == server.url_for("/page")
    assert len(handler.stamps) == 2
    assert handler.stamps[1] - handler.stamps[0] >= 1.0


def test_a_429_that_persists_is_an_error_after_three_attempts(server: HTTPServer) -> None:
    handler = StampedHandler(
        lambda r: Response("slow down", status=429, headers={"Retry-After": "0"})
    )
    server.expect_request("/page").respond_with_handler(handler)
    [error] = web_source(server.url_for("/page")).list().errors
    assert "HTTP 429 on each of 3 attempts; the stored version (if any) is kept" in error.message
    assert len(handler.stamps) == 3


def test_a_page_that_answers_503_twice_honouring_retry_after_is_listed_by_the_first_crawl(
    server: HTTPServer,
) -> None:
    answers = iter([Response("later", status=503, headers={"Retry-After": "1"}),
                    Response("later", status=503, headers={"Retry-After": "1"})])
    handler = StampedHandler(lambda r: next(answers, Response("ok", content_type="text/plain")))
    server.expect_request("/page").respond_with_handler(handler)
    [item] = web_source(server.url_for("/page")).list().items
    assert item.key == server.url_for("/page")
    assert len(handler.stamps) == 3
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(handler.stamps))


@pytest.mark.parametrize("status", [500, 502, 504])
def test_a_passing_server_error_without_retry_after_is_retried_after_a_backoff(
    server: HTTPServer, status: int
) -> None:
    answers = iter([Response("oops", status=status)])
    handler = StampedHandler(lambda r: next(answers, Response("ok", content_type="text/plain")))
    server.expect_request("/page").respond_with_handler(handler)
    [item] = web_source(server.url_for("/page")).list().items
    assert item.key == server.url_for("/page")
    assert len(handler.stamps) == 2
    assert handler.stamps[1] - handler.stamps[0] >= 1.0  # BACKOFF


def test_not_implemented_is_no_transient_failure_and_is_asked_once(server: HTTPServer) -> None:
    handler = StampedHandler(lambda r: Response("no", status=501))
    server.expect_request("/page").respond_with_handler(handler)
    [error] = web_source(server.url_for("/page")).list().errors
    assert "HTTP 501; the stored version (if any) is kept" in error.message
    assert len(handler.stamps) == 1


def test_the_retry_budget_bounds_the_retries_of_a_crawl_and_keeps_stored_pages(
    server: HTTPServer,
) -> None:
    handler = StampedHandler(lambda r: Response("down", status=503, headers={"Retry-After": "0"}))
    for n in range(4):
        server.expect_request(f"/p{n}").respond_with_handler(handler)
    urls = [server.url_for(f"/p{n}") for n in range(4)]
    known = {url: KnownItem(url, validators=Validators('"v1"', None)) for url in urls}
    listing = web_source(urls, retry_budget=3, max_connections=1).list(known)
    assert len(handler.stamps) == 4 + 3  # one attempt each, three retries in all
    assert listing.items == ()
    assert {e.key for e in listing.errors} == set(urls)
    assert not any(e.missing for e in listing.errors)
    messages = sorted(e.message for e in listing.errors)
    assert sum("not retried: the crawl's retry_budget=3 is spent" in m for m in messages) >= 2


def test_a_retry_after_beyond_the_cap_is_not_waited_for(server: HTTPServer) -> None:
    handler = StampedHandler(lambda r: Response("x", status=503, headers={"Retry-After": "3600"}))
    server.expect_request("/page").respond_with_handler(handler)
    started = time.monotonic()
    [error] = web_source(server.url_for("/page"), retry_after_cap=5).list().errors
    assert time.monotonic() - started < 3
    assert len(handler.stamps) == 1
    assert "beyond retry_after_cap=5 s" in error.message


def test_a_redirect_loop_is_an_error_naming_the_url(server: HTTPServer) -> None:
    server.expect_request("/a").respond_with_data("", status=302, headers={"Location": "/b"})
    server.expect_request("/b").respond_with_data("", status=302, headers={"Location": "/a"})
    [error] = web_source(server.url_for("/a")).list().errors
    assert error.key == server.url_for("/a")
    assert "redirect loop" in error.message
    assert server.url_for("/a") in error.message


def test_too_many_redirects_is_an_error(server: HTTPServer) -> None:
    for i in range(5):
        server.expect_request(f"/r{i}").respond_with_data(
            "", status=302, headers={"Location": f"/r{i + 1}"}
        )
    [error] = web_source(server.url_for("/r0"), max_redirects=3).list().errors
    assert "more than max_redirects=3 redirects" in error.message


def test_a_redirect_out_of_scope_is_an_error_naming_the_target(server: HTTPServer) -> None:
    server.expect_request("/docs/a").respond_with_data(
        "", status=301, headers={"Location": "/blog/a"}
    )
    source = web_source(server.url_for("/docs/a"), path_prefixes=("/docs/",))
    [error] = source.list().errors
    assert error.key == server.url_for("/docs/a")
    assert server.url_for("/blog/a") in error.message
    assert "outside the allowed scope" in error.message
    assert [r.path for r, _ in server.log if r.path != "/robots.txt"] == ["/docs/a"]


@pytest.mark.parametrize("declared", [True, False])
def test_a_body_over_max_bytes_is_an_error(server: HTTPServer, declared: bool) -> None:
    body = b"x" * 50_000

    def stream() -> Iterator[bytes]:
        for i in range(0, len(body), 1000):
            yield body[i : i + 1000]

    if declared:
        response = Response(body, content_type="text/plain")
    else:
        response = Response(stream(), content_type="text/plain")  # no Content-Length
    server.expect_request("/big").respond_with_response(response)
    [error] = web_source(server.url_for("/big"), max_bytes=10_000).list().errors
    assert "exceeds max_bytes=10000" in error.message
    assert server.url_for("/big") in error.message


def test_a_gzip_bomb_is_stopped_at_the_decompression_cap(server: HTTPServer) -> None:
    bomb = gzip.compress(b" " * 20_000_000)
    assert len(bomb) < 30_000
    server.expect_request("/bomb").respond_with_data(
        bomb, content_type="text/html", headers={"Content-Encoding": "gzip"}
    )
    source = web_source(server.url_for("/bomb"), max_decompressed_bytes=1_000_000)
    [error] = source.list().errors
    assert "max_decompressed_bytes=1000000" in error.message
    assert server.url_for("/bomb") in error.message


@pytest.mark.parametrize(("encoding", "encode"), [("gzip", gzip.compress), ("br", brotli.compress)])
def test_compressed_pages_are_decoded(
    server: HTTPServer, encoding: str, encode: Callable[[bytes], bytes]
) -> None:
    page = b"<p>compressed page</p>" * 50
    server.expect_request("/c").respond_with_data(
        encode(page),
        content_type="text/html",
        headers={"Content-Encoding": encoding},
    )
    source = web_source(server.url_for("/c"))
    [item] = source.list().items
    assert source.read(item) == page


def test_read_fetches_again_when_the_body_is_not_held_and_names_a_failure(
    server: HTTPServer,
) -> None:
    server.expect_request("/a").respond_with_data("fresh", content_type="text/plain")
    source = web_source(server.url_for("/a"))
    item = SourceItem(server.url_for("/a"), server.url_for("/a"), "text/plain")
    assert source.read(item) == b"fresh"
    missing = SourceItem(server.url_for("/nope"), server.url_for("/nope"), "text/plain")
    with pytest.raises(DocumentError, match="HTTP 404"):
        source.read(missing)


def test_list_and_read_work_from_inside_a_running_event_loop(server: HTTPServer) -> None:
    server.expect_request("/").respond_with_data("inside", content_type="text/plain")
    source = web_source(server.url_for("/"))

    async def caller() -> bytes:
        [item] = source.list().items
        source._bodies.clear()  # force the fetching path of read()
        return source.read(item)

    assert asyncio.run(caller()) == b"inside"
