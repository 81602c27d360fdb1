"""Faults a polite server never makes, from a raw socket server: nothing is lost to them."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from kbsync.model import KnownItem
from tests.fixtures.web.servers import (
    Handler,
    RawServer,
    dripper,
    resetting,
    truncated,
    web_source,
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_truncated_body_is_an_error_and_keeps_the_page() -> None:
    with RawServer({"/page": truncated}) as server:
        url = server.url("/page")
        listing = web_source(url).list({url: KnownItem(url, missing=1)})
    [error] = listing.errors
    assert error.key == url
    assert "truncated" in error.message
    assert url in error.message
    assert not error.missing
    assert listing.items == ()


def test_a_connection_reset_is_an_error_and_keeps_the_page() -> None:
    with RawServer({"/page": resetting}) as server:
        url = server.url("/page")
        listing = web_source(url).list({url: KnownItem(url)})
    [error] = listing.errors
    assert error.key == url
    assert "connection" in error.message.lower() or "truncated" in error.message
    assert not error.missing


@pytest.mark.parametrize("handler", [truncated, resetting])
def test_a_page_whose_first_connection_fails_is_listed_by_its_retry(handler: Handler) -> None:
    served: list[int] = []

    def flaky(conn: socket.socket) -> None:
        served.append(1)
        if len(served) == 1:
            handler(conn)
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: 2\r\n\r\nok")

    with RawServer({"/page": flaky}) as server:
        url = server.url("/page")
        listing = web_source(url).list()
    assert [i.key for i in listing.items] == [url]
    assert listing.errors == ()
    assert len(served) == 2


def test_a_fault_that_persists_says_how_often_it_was_tried() -> None:
    with RawServer({"/page": truncated}) as server:
        url = server.url("/page")
        listing = web_source(url).list()
        assert server.paths.count("/page") == 3
    [error] = listing.errors
    assert error.message.endswith("(3 attempts)"), error.message


def test_a_slow_drip_is_cut_off_by_the_total_deadline() -> None:
    stop = threading.Event()
    with RawServer({"/drip": dripper(stop, interval=0.2)}) as server:
        url = server.url("/drip")
        started = time.monotonic()
        listing = web_source(url, timeout=1.0, retry_budget=0).list()  # one attempt
        elapsed = time.monotonic() - started
        stop.set()
    [error] = listing.errors
    assert "timed out" in error.message
    assert "1 s" in error.message
    # Each byte arrives well within any read timeout; only the total deadline stops it.
    assert 0.9 <= elapsed < 3.0


def test_when_no_request_gets_an_answer_the_listing_is_incomplete() -> None:
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/"
    listing = web_source([url, f"http://127.0.0.1:{port}/other"]).list({url: KnownItem(url)})
    assert not listing.complete
    assert listing.items == ()
    assert {e.key for e in listing.errors} >= {url}
    assert all(not e.missing for e in listing.errors)
    assert any("incomplete" in w for w in listing.warnings)


@pytest.mark.parametrize("handler", [truncated, resetting])
def test_a_fault_on_one_page_does_not_stop_the_others(handler: Handler) -> None:
    def page(conn: socket.socket) -> None:
        body = b'<a href="/bad">bad</a><a href="/good">good</a>'
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )

    def good(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")

    with RawServer({"/": page, "/bad": handler, "/good": good}) as server:
        listing = web_source(server.url("/")).list()
    assert [i.key for i in listing.items] == [server.url("/"), server.url("/good")]
    assert [e.key for e in listing.errors] == [server.url("/bad")]
    assert listing.complete
