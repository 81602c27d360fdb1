"""A website kept in sync through the engine, against a real server on 127.0.0.1."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest_httpserver = pytest.importorskip("pytest_httpserver")

from pytest_httpserver import HTTPServer  # noqa: E402
from werkzeug import Request, Response  # noqa: E402

from kbsync.app.knowledge_base import KnowledgeBase  # noqa: E402
from kbsync.engine import init_config  # noqa: E402
from kbsync.store import Frontier, RecordStore  # noqa: E402

PARAGRAPHS = {
    "/": "Welcome to the harbour guide. " * 40,
    "/lights": "The lights of the harbour are kept by a keeper who climbs the stairs. " * 30,
    "/tides": "Tides rise and fall twice a day and the boats wait for the water. " * 30,
}


class Site:
    """Pages with ETags that honour If-None-Match, and a log of what was sent."""

    def __init__(self) -> None:
        self.pages = dict(PARAGRAPHS)
        self.status: dict[str, int] = {}
        self.location: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        self.raw: dict[str, tuple[bytes, str]] = {}
        self.unavailable: dict[str, int] = {}  # 503s (Retry-After: 1) left to answer
        self.bodies_sent = 0

    def html(self, path: str) -> str:
        links = "".join(f'<a href="{p}"></a>' for p in self.pages if p != path)
        title = self.titles.get(path, path)
        return (f"<html><head><title>Harbour {title}</title></head><body><main><h1>{title}</h1>"
                f"<p>{self.pages[path]}</p>{links}</main></body></html>")

    def __call__(self, request: Request) -> Response:
        path = request.path
        if path == "/robots.txt":
            return Response("User-agent: *\nAllow: /\n", content_type="text/plain")
        if self.unavailable.get(path, 0) > 0:
            self.unavailable[path] -= 1
            return Response("busy", status=503, headers={"Retry-After": "1"})
        if path in self.raw:
            body, content_type = self.raw[path]
            return Response(body, content_type=content_type)
        if path in self.status:
            headers = {"Location": self.location[path]} if path in self.location else {}
            return Response("", status=self.status[path], headers=headers)
        if path not in self.pages:
            return Response("not found", status=404)
        body = self.html(path)
        etag = '"' + hashlib.sha1(body.encode()).hexdigest()[:16] + '"'
        if request.headers.get("If-None-Match") == etag:
            return Response(status=304, headers={"ETag": etag})
        self.bodies_sent += 1
        return Response(body, content_type="text/html; charset=utf-8", headers={"ETag": etag})


@pytest.fixture
def site(httpserver: HTTPServer) -> Site:
    handler = Site()
    httpserver.expect_request("").respond_with_handler(handler)
    return handler


@pytest.fixture
def kb(tmp_path: Path, httpserver: HTTPServer, site: Site) -> Path:
    init_config(tmp_path, [httpserver.url_for("/")])
    config = (tmp_path / "kbsync.toml").read_text()
    config += "allow_private_addresses = true\ndelay = 0.0\nsoft_404_check = false\n"
    (tmp_path / "kbsync.toml").write_text(config)
    return tmp_path


def test_a_site_is_crawled_then_revalidated_without_downloading(kb: Path, site: Site) -> None:
    with KnowledgeBase.open(kb) as engine:
        first = engine.sync()
        assert first.total("new") == 3, first.sources[0].failures
        sent = site.bodies_sent
        second = engine.sync()
        assert second.total("unchanged") == 3
        assert site.bodies_sent == sent
        assert second.sources[0].bytes_read == 0
        assert engine.verify().problems == ()


def test_a_changed_page_is_modified_and_reported_with_regions(kb: Path, site: Site) -> None:
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        site.pages["/tides"] += " A storm surge once flooded the quay."
        report = engine.sync()
        assert report.total("modified") == 1
        (edit,) = [c for c in report.sources[0].changes if c.change is not None]
        assert edit.key.endswith("/tides")
        assert edit.action == "modified"
        assert edit.change is not None
        assert edit.change.regions


def test_a_gone_page_is_deleted_and_a_404_waits_for_confirmation(kb: Path, site: Site) -> None:
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        site.status["/lights"] = 410
        del site.pages["/tides"]  # now a 404, and no longer linked
        report = engine.sync()
        assert report.total("deleted") == 1
        assert report.total("failed") == 1  # the 404, kept until confirmed
        again = engine.sync()
        assert again.total("deleted") == 1
        assert engine.status().documents == 1


def test_a_server_error_keeps_the_page(kb: Path, site: Site) -> None:
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        site.status["/lights"] = 503
        report = engine.sync(allow_mass_delete=False)
        assert report.total("deleted") == 0
        assert engine.status().documents == 3


def test_a_markup_only_change_is_no_change_of_content(kb: Path, site: Site) -> None:
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        original = site.html
        site.html = lambda path: original(path).replace("<main>", '<main class="v2" id="x">')  # type: ignore[method-assign]
        report = engine.sync()
        assert report.total("modified") == 0
        assert report.total("metadata-only") == 0
        assert report.total("unchanged") == 3  # a re-download with identical text
        assert report.sources[0].embeddings_computed == 0
        assert all(c.change is None for c in report.sources[0].changes)


def test_an_etag_that_changes_on_every_request_reports_no_false_change(
    kb: Path, site: Site
) -> None:
    counter = iter(range(10_000))
    original = site.__call__

    def lying(request: Request) -> Response:
        response = original(request)
        if response.status_code == 200 and "ETag" in response.headers:
            response.headers["ETag"] = f'"rotating-{next(counter)}"'
        return response

    site.__call__ = lying  # type: ignore[method-assign]
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        report = engine.sync()
        assert report.total("modified") == 0
        assert report.sources[0].embeddings_computed == 0


def test_a_permanent_redirect_moves_the_page_and_keeps_its_vectors(
    kb: Path, site: Site, httpserver: HTTPServer
) -> None:
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        site.pages["/lighthouses"] = site.pages.pop("/lights")
        site.titles["/lighthouses"] = "/lights"  # the same page at a new address
        site.status["/lights"] = 301
        site.location["/lights"] = httpserver.url_for("/lighthouses")
        report = engine.sync()
        assert report.total("moved") == 1
        assert report.sources[0].embeddings_computed == 0
        assert engine.store.document(httpserver.url_for("/lighthouses")) is not None


def test_the_charset_comes_from_the_header_and_a_wrong_label_does_not_garble_text(
    kb: Path, site: Site
) -> None:
    russian = "Маяк стоит на скале, и смотритель каждый вечер зажигает лампу. " * 20
    page = f"<html><body><main><h1>Маяк</h1><p>{russian}</p></main></body></html>"
    site.raw["/ru"] = (page.encode("cp1251"), "text/html; charset=windows-1251")
    wrong = "Café crème, naïve façade — the keeper wrote in his log. " * 20
    body = f"<html><body><main><h1>Log</h1><p>{wrong}</p></main></body></html>"
    site.raw["/mislabeled"] = (body.encode("utf-8"), "text/html; charset=iso-8859-1")
    site.pages["/index"] = '<a href="/ru">ru</a> <a href="/mislabeled">log</a> ' * 5
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        keys = list(engine.store.manifest(engine.sources[0].name))
        ru = engine.store.document(next(k for k in keys if k.endswith("/ru")))
        log = engine.store.document(next(k for k in keys if k.endswith("/mislabeled")))
        assert ru is not None
        assert "смотритель" in ru.text
        assert log is not None
        assert "Café crème, naïve façade" in log.text


def test_init_allow_private_lets_a_site_on_loopback_be_crawled(
    tmp_path: Path, httpserver: HTTPServer, site: Site
) -> None:
    from typer.testing import CliRunner

    from kbsync.cli import app

    url = httpserver.url_for("/")
    refused, allowed = tmp_path / "refused", tmp_path / "allowed"
    runner = CliRunner()
    assert runner.invoke(app, ["init", url, "--folder", str(refused),
                               "--embedder", "hashing"]).exit_code == 0
    result = runner.invoke(app, ["init", url, "--folder", str(allowed), "--embedder", "hashing",
                                 "--allow-private", "127.0.0.1", "--allow-private", "10.0.0.0/8"])
    assert result.exit_code == 0, result.output
    assert 'allow_private_addresses = ["127.0.0.1", "10.0.0.0/8"]' in (
        allowed / "kbsync.toml").read_text()
    with KnowledgeBase.open(refused) as engine:
        report = engine.sync()
        assert report.total("new") == 0
        assert "localhost names the local machine" in str(report.sources[0].failures)
    with KnowledgeBase.open(allowed) as engine:
        assert engine.sync().total("new") == 3


def test_init_allow_private_refuses_a_redirect_to_another_port_of_that_address(
    tmp_path: Path, httpserver: HTTPServer, site: Site
) -> None:
    from typer.testing import CliRunner

    from kbsync.cli import app
    from tests.fixtures.web.servers import RawServer

    with RawServer({"/": lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\n\r\nsecret")}) as other:
        site.pages["/moved"] = "Moved away."
        site.status["/moved"] = 302  # as to port 22 of the same machine
        site.location["/moved"] = other.url("/")
        url = f"http://127.0.0.1:{httpserver.port}/"  # the same address: within the scope
        result = CliRunner().invoke(app, ["init", url, "--folder", str(tmp_path), "--embedder",
                                          "hashing", "--allow-private", "127.0.0.1"])
        assert result.exit_code == 0, result.output
        with KnowledgeBase.open(tmp_path) as engine:
            report = engine.sync()
        assert other.paths == []  # nothing was sent to the other port
    assert report.total("new") == 3
    [(key, message)] = report.sources[0].failures
    assert key == url + "moved"
    assert (f"a redirect leads here, to a refused address: 127.0.0.1 port {other.port} is "
            "refused: allow_private_addresses admits 127.0.0.1 on ports 80, 443, "
            f"{httpserver.port} only") in message, message


def test_init_allow_private_refuses_what_is_no_address_or_has_no_website(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kbsync.cli import app

    runner = CliRunner()
    bad = runner.invoke(app, ["init", "http://intranet.example/", "--folder", str(tmp_path / "a"),
                              "--allow-private", "localhost"])
    assert bad.exit_code != 0
    assert "--allow-private 'localhost': not an IP address" in bad.output
    folder = runner.invoke(app, ["init", str(tmp_path), "--folder", str(tmp_path / "b"),
                                 "--allow-private", "127.0.0.1"])
    assert folder.exit_code != 0
    assert "no source is a URL" in folder.output
    assert not (tmp_path / "a" / "kbsync.toml").exists()


def test_a_page_that_answers_503_twice_when_first_found_is_indexed_by_the_first_sync(
    kb: Path, site: Site
) -> None:
    site.pages["/news"] = "The harbour master posts the news of the week on the door. " * 20
    site.unavailable["/news"] = 2  # then it answers, within the crawl's three attempts
    with KnowledgeBase.open(kb) as engine:
        first = engine.sync()
        assert first.total("new") == 4, first.sources[0].failures
        assert first.total("failed") == 0
    assert site.unavailable["/news"] == 0


def test_a_page_that_failed_when_first_linked_is_tried_again_next_sync(
    kb: Path, site: Site
) -> None:
    site.pages["/news"] = "The harbour master posts the news of the week on the door. " * 20
    site.status["/news"] = 503  # the first time it is linked, it is down
    with KnowledgeBase.open(kb) as engine:
        first = engine.sync()
        assert first.total("new") == 3
        assert first.total("failed") == 1
        del site.status["/news"]  # back; every page linking to it is unchanged (304)
        second = engine.sync()
        assert second.total("new") == 1, second.sources[0].failures
        assert second.total("unchanged") == 3
        assert any(k.endswith("/news") for k in engine.store.manifest(engine.sources[0].name))
        third = engine.sync()
        assert third.total("unchanged") == 4
        assert engine.store.frontier(engine.sources[0].name) == frozenset()


def test_the_frontier_forgets_a_page_that_is_gone_and_a_plan_leaves_it_alone(
    kb: Path, site: Site
) -> None:
    site.pages["/old"] = "An old notice about the ferry. " * 20
    site.status["/old"] = 503
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        name = engine.sources[0].name
        (pending,) = engine.store.frontier(name)
        assert pending.endswith("/old")
        site.status["/old"] = 410
        engine.plan()
        assert engine.store.frontier(name) == {pending}  # a plan writes nothing
        report = engine.sync()
        assert report.total("failed") == 0
        assert engine.store.frontier(name) == frozenset()


def test_the_frontier_is_kept_per_source_in_each_store(store: RecordStore) -> None:
    assert isinstance(store, Frontier)
    store.set_frontier("site", {"https://a.example/x", "https://a.example/y"})
    store.set_frontier("other", {"https://b.example/"})
    store.set_frontier("site", {"https://a.example/y"})
    assert store.frontier("site") == {"https://a.example/y"}
    assert store.frontier("other") == {"https://b.example/"}
    store.set_frontier("site", ())
    assert store.frontier("site") == frozenset()


def test_a_new_link_on_a_hub_page_is_reported_as_a_change_of_that_page(
    kb: Path, site: Site
) -> None:
    def hub(posts: list[str]) -> tuple[bytes, str]:
        items = "".join(f'<li><a href="/p{i}">{t}</a></li>' for i, t in enumerate(posts))
        page = ("<html><head><title>News</title></head><body><main><h1>News</h1>"
                "<p>Welcome to the harbour news, where the harbour office writes what "
                "happens on the quay, week by week, for the boats and the people who live "
                "by the water.</p><h2>Latest</h2>"
                f"<ul>{items}</ul></main></body></html>")
        return page.encode(), "text/html; charset=utf-8"

    posts = ["The ferry timetable changes in June", "A storm closed the pier on Monday",
             "New lights for the breakwater"]
    site.raw["/news"] = hub(posts)
    site.pages["/index"] = '<a href="/news">news</a> ' * 5
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        site.raw["/news"] = hub(["The summer regatta is on Saturday", *posts[:2]])
        report = engine.sync()
        changed = [c.key for c in report.sources[0].changes if c.action == "modified"]
        assert [k.rsplit("/", 1)[-1] for k in changed] == ["news"]
