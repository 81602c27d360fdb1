"""``sync --due`` through the engine and the command line, against a real server on 127.0.0.1:
only pages that are due are requested, and a page not checked is never deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest.importorskip("pytest_httpserver")

from pytest_httpserver import HTTPServer
from typer.testing import CliRunner

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.cli import app
from kbsync.engine import init_config
from kbsync.model import PageSchedule
from kbsync.store import Schedules
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from tests.integration.test_web_sync import Site


@pytest.fixture
def site(httpserver: HTTPServer) -> Site:
    handler = Site()
    httpserver.expect_request("").respond_with_handler(handler)
    return handler


@pytest.fixture
def kb(tmp_path: Path, httpserver: HTTPServer, site: Site) -> Path:
    init_config(tmp_path, [httpserver.url_for("/")])
    config = (tmp_path / "kbsync.toml").read_text()
    # An hour at least between checks: a test never runs that long, so nothing is due twice.
    config += ("allow_private_addresses = true\ndelay = 0.0\nsoft_404_check = false\n"
               "min_interval = 3600\nmax_interval = 86400\n")
    (tmp_path / "kbsync.toml").write_text(config)
    return tmp_path


def _page_requests(httpserver: HTTPServer) -> int:
    return sum(1 for request, _ in httpserver.log if request.path != "/robots.txt")


def test_a_due_sync_requests_no_page_that_is_not_due_and_deletes_none(
    kb: Path, site: Site, httpserver: HTTPServer
) -> None:
    with KnowledgeBase.open(kb) as engine:
        first = engine.sync()
        assert first.total("new") == 3, first.sources[0].failures
        store = engine.store
        assert isinstance(store, Schedules)
        assert len(store.schedules(first.sources[0].source)) == 3
        before = _page_requests(httpserver)
        site.status["/lights"] = 410  # gone, but not due: not asked, so not deleted
        site.pages["/tides"] += " A storm surge once flooded the quay."
        due = engine.sync(due=True)
        assert _page_requests(httpserver) == before
        assert due.total("unchanged") == 3
        assert due.total("deleted") == 0
        assert due.total("modified") == 0
        assert not due.failed
        assert due.sources[0].to_dict()["pages_not_due"] == 3
        assert due.sources[0].to_dict()["pages_checked"] == 0
        assert engine.status().documents == 3
        # A sync without --due checks every page: the safety net sees both changes.
        full = engine.sync()
        assert full.total("deleted") == 1
        assert full.total("modified") == 1
        assert len(store.schedules(full.sources[0].source)) == 2


def test_sync_due_json_shows_the_pages_checked_and_not_due(kb: Path, site: Site) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["sync", "--config", str(kb), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["sources"][0]["pages_checked"] == 3
    again = runner.invoke(app, ["sync", "--config", str(kb), "--due", "--json"])
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)["sources"][0]
    assert (report["pages_checked"], report["pages_not_due"]) == (0, 3)


def test_both_stores_keep_schedules_replace_them_and_drop_them_with_the_document(
    store: SqliteStore | PostgresStore,
) -> None:
    a = PageSchedule(checked=10.0, changed=5.0, interval=3600.0, digest="d1",
                     media_type="text/html")
    b = PageSchedule(checked=20.0, changed=20.0, interval=7200.0)
    store.set_schedules("web", {"https://x/a": a, "https://x/b": b}, replace=True)
    store.set_schedules("other", {"https://x/a": b}, replace=True)
    assert store.schedules("web") == {"https://x/a": a, "https://x/b": b}
    # An incomplete listing merges; a complete one replaces.
    store.set_schedules("web", {"https://x/b": a}, replace=False)
    assert store.schedules("web") == {"https://x/a": a, "https://x/b": a}
    store.set_schedules("web", {"https://x/a": b}, replace=True)
    assert store.schedules("web") == {"https://x/a": b}
    assert store.schedules("other") == {"https://x/a": b}


def test_an_erased_page_leaves_no_schedule_behind(
    kb: Path, site: Site, httpserver: HTTPServer
) -> None:
    with KnowledgeBase.open(kb) as engine:
        first = engine.sync()
        store = engine.store
        assert isinstance(store, Schedules)
        name = first.sources[0].source
        (lights,) = [k for k in store.schedules(name) if k.endswith("/lights")]
        engine.erase(lights)
        assert lights not in store.schedules(name)
        site.pages["/"] += " The harbour has a new guide."  # read again: its links followed
        again = engine.sync()
        assert again.sources[0].skipped_erased == 1  # found again by its link, and skipped
        assert len(store.schedules(name)) == 2
        assert lights not in store.schedules(name)


def test_a_due_sync_with_workers_requests_no_page_that_is_not_due_and_deletes_none(
    kb: Path, site: Site, httpserver: HTTPServer, postgres_url: str
) -> None:
    from tests.conftest import Backend

    backend = Backend("postgres", postgres_url)
    backend.configure(kb)
    try:
        with KnowledgeBase.open(kb) as engine:
            first = engine.sync(workers=2)
            assert first.total("new") == 3, first.sources[0].failures
            before = _page_requests(httpserver)
            site.status["/lights"] = 410
            site.pages["/tides"] += " A storm surge once flooded the quay."
            due = engine.sync(workers=2, due=True)
            assert _page_requests(httpserver) == before
            assert (due.total("unchanged"), due.total("deleted")) == (3, 0)
            assert due.sources[0].to_dict()["pages_not_due"] == 3
            full = engine.sync(workers=2)
            assert (full.total("deleted"), full.total("modified")) == (1, 1)
            store = engine.store
            assert isinstance(store, Schedules)
            assert len(store.schedules(full.sources[0].source)) == 2
    finally:
        backend.drop()
