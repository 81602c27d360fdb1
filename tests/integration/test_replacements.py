"""Verdict routing in a sync: a collapsed text is held until a second check confirms it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from typer.testing import CliRunner
from werkzeug import Request, Response

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.engine import init_config
from kbsync.model import Verdict
from kbsync.report import SyncResult
from tests.conftest import Backend

LOGIN_WALL = "Please sign in to continue.\n\nForgot your password? Create an account.\n"


def write(path: Path, text: str) -> None:
    """Write ``text`` with a new mtime, so the stat gate sees the change whatever the clock."""
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def home(tmp_path: Path, prose: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "guide.md", prose[:6000])
    write(docs / "other.md", prose[6000:9000])
    KnowledgeBase.create(tmp_path, sources=["docs"], embedder={"kind": "hashing"}).close()
    with KnowledgeBase.open(tmp_path) as kb:
        assert kb.sync().total("new") == 2
    return tmp_path


def digests(kb: KnowledgeBase, key: str) -> list[str]:
    return [c.digest for c in kb.store.indexed_chunks(key=key)]


def warnings(report: SyncResult) -> list[str]:
    return [w for s in report.sources for w in s.warnings]


def test_a_collapsed_file_keeps_its_previous_version_until_the_next_sync_confirms_it(
    home: Path, prose: str,
) -> None:
    with KnowledgeBase.open(home) as kb:
        before, text = digests(kb, "guide.md"), kb.document("guide.md").text
        write(home / "docs" / "guide.md", LOGIN_WALL)
        held = kb.sync()
        assert (held.total("modified"), held.total("held")) == (0, 1)
        assert held.sources[0].embeddings_computed == 0
        (entry,) = [c for c in held.sources[0].changes if c.key == "guide.md"]
        assert entry.action == "held"
        assert entry.change is not None
        assert entry.change.verdict is Verdict.REEXAMINE_EXTRACTION
        (warning,) = warnings(held)
        assert "guide.md" in warning
        assert "--accept-replacements" in warning
        assert kb.document("guide.md").text == text
        assert digests(kb, "guide.md") == before
        assert kb.verify().problems == ()
    # The state awaiting confirmation is in the store: a new process confirms it.
    with KnowledgeBase.open(home) as kb:
        confirmed = kb.sync()
        assert confirmed.total("modified") == 1
        assert "confirmed" in " ".join(warnings(confirmed))
        (change,) = [c.change for c in confirmed.sources[0].changes if c.key == "guide.md"]
        assert change is not None
        assert change.verdict is Verdict.REEXAMINE_EXTRACTION
        assert kb.document("guide.md").text == LOGIN_WALL.strip()
        assert kb.sync().total("modified") == 0
        assert warnings(kb.sync()) == []


def test_a_different_collapsed_text_on_the_next_check_is_held_again(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        text = kb.document("guide.md").text
        write(home / "docs" / "guide.md", LOGIN_WALL)
        kb.sync()
        write(home / "docs" / "guide.md", "Service unavailable. Try again later.\n")
        again = kb.sync()
        assert again.total("modified") == 0
        assert kb.document("guide.md").text == text


def test_erasing_a_held_document_leaves_no_entry_naming_it_and_confirming_leaves_none(
        home: Path) -> None:
    import sqlite3

    def meta_names() -> list[str]:
        db = sqlite3.connect(home / ".kbsync" / "kbsync.db")
        try:
            return [r[0] for r in db.execute("SELECT name FROM meta WHERE name LIKE 'held%'")]
        finally:
            db.close()

    with KnowledgeBase.open(home) as kb:
        for name in ("guide.md", "other.md"):
            write(home / "docs" / name, LOGIN_WALL)
        kb.sync()
        assert len(meta_names()) == 2
        kb.sync()  # confirmed: nothing is left awaiting confirmation
        assert meta_names() == []
        write(home / "docs" / "guide.md", "A long new guide. " * 200)
        kb.sync()
        write(home / "docs" / "guide.md", "Service unavailable. Try again later.\n")
        kb.sync()
        assert len(meta_names()) == 1
        kb.erase("guide.md")
        assert meta_names() == []


def test_a_collapse_that_went_away_must_be_seen_twice_again_when_it_comes_back(
        home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        text = (home / "docs" / "guide.md").read_text(encoding="utf-8")
        write(home / "docs" / "guide.md", LOGIN_WALL)
        assert kb.sync().total("modified") == 0  # held
        write(home / "docs" / "guide.md", text)  # the page came back as it was
        assert kb.sync().total("modified") == 0
        write(home / "docs" / "guide.md", LOGIN_WALL)
        again = kb.sync()
        assert again.total("modified") == 0  # held again, not taken as confirmed
        assert "kept the previous version" in " ".join(warnings(again))


def test_a_collapsed_file_is_applied_at_once_with_accept_replacements(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        write(home / "docs" / "guide.md", LOGIN_WALL)
        report = kb.sync(accept_replacements=True)
        assert report.total("modified") == 1
        assert "accepted" in " ".join(warnings(report))
        assert kb.document("guide.md").text == LOGIN_WALL.strip()


def test_the_command_line_accepts_replacements(home: Path) -> None:
    write(home / "docs" / "guide.md", LOGIN_WALL)
    result = CliRunner().invoke(app, ["sync", "--config", str(home), "--accept-replacements",
                                      "--json"])
    assert result.exit_code == 0, result.output
    with KnowledgeBase.open(home) as kb:
        assert kb.document("guide.md").text == LOGIN_WALL.strip()


def test_an_ordinary_edit_goes_through_and_a_cosmetic_one_is_reported_as_cosmetic(
    home: Path, prose: str,
) -> None:
    with KnowledgeBase.open(home) as kb:
        at = prose.index(" the ", 3000) + 1
        edited = prose[:at] + "teh" + prose[at + 3:6000]
        write(home / "docs" / "guide.md", edited)
        report = kb.sync()
        assert report.total("modified") == 1
        assert report.sources[0].embeddings_computed >= 1
        (change,) = [c.change for c in report.sources[0].changes if c.key == "guide.md"]
        assert change is not None
        assert change.verdict is Verdict.COSMETIC
        assert [edited[r.offset:r.end] for r in change.regions] == ["teh"]
        assert warnings(report) == []


def test_a_first_version_is_never_held(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        write(home / "docs" / "login.md", LOGIN_WALL)
        assert kb.sync().total("new") == 1


class Site:
    """A page with an ETag, that can turn into a login wall served with 200."""

    def __init__(self, text: str) -> None:
        self.text = text

    def body(self, path: str) -> str:
        if path == "/":
            return "<html><body><main><h1>Home</h1><p>Our guide.</p>" \
                   '<a href="/guide">guide</a></main></body></html>'
        return f"<html><head><title>Guide</title></head><body><main><h1>Guide</h1>" \
               f"<p>{self.text}</p></main></body></html>"

    def __call__(self, request: Request) -> Response:
        if request.path == "/robots.txt":
            return Response("User-agent: *\nAllow: /\n", content_type="text/plain")
        if request.path not in ("/", "/guide"):
            return Response("not found", status=404)
        body = self.body(request.path)
        etag = '"' + hashlib.sha1(body.encode()).hexdigest()[:16] + '"'
        if request.headers.get("If-None-Match") == etag:
            return Response(status=304, headers={"ETag": etag})
        return Response(body, content_type="text/html; charset=utf-8", headers={"ETag": etag})


def test_a_web_page_turned_login_wall_keeps_its_text_and_vectors_until_confirmed(
    tmp_path: Path, server: HTTPServer, prose: str,
) -> None:
    page = " ".join(prose[:5000].split())
    site = Site(page)
    server.expect_request("").respond_with_handler(site)
    init_config(tmp_path, [server.url_for("/")])
    config = (tmp_path / "kbsync.toml").read_text()
    config += "allow_private_addresses = true\ndelay = 0.0\nsoft_404_check = false\n"
    (tmp_path / "kbsync.toml").write_text(config)
    with KnowledgeBase.open(tmp_path) as kb:
        assert kb.sync().total("new") == 2
        key = server.url_for("/guide")
        text, before = kb.document(key).text, digests(kb, key)
        site.text = "Please sign in to continue. Forgot your password?"
        held = kb.sync()
        assert held.total("modified") == 0
        assert any(key in w for w in warnings(held))
        assert kb.document(key).text == text
        assert digests(kb, key) == before
        assert kb.sync().total("modified") == 1
        assert "sign in" in kb.document(key).text


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[Backend]:
    found = Backend("postgres", postgres_url)
    yield found
    found.drop()


def test_parallel_workers_hold_a_collapsed_file_as_one_process_does(
    pg: Backend, tmp_path: Path, prose: str,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "guide.md", prose[:6000])
    write(docs / "other.md", prose[6000:9000])
    init_config(tmp_path, [str(docs)])
    pg.configure(tmp_path)
    with KnowledgeBase.open(tmp_path) as kb:
        assert kb.sync(workers=1).total("new") == 2
        text = kb.document("guide.md").text
        write(docs / "guide.md", LOGIN_WALL)
        held = kb.sync(workers=1)
        assert (held.total("modified"), held.total("held")) == (0, 1)
        assert any("guide.md" in w for w in warnings(held))
        assert kb.document("guide.md").text == text
        assert kb.sync(workers=1).total("modified") == 1
        assert kb.document("guide.md").text == LOGIN_WALL.strip()
        write(docs / "other.md", LOGIN_WALL + "Other.\n")
        assert kb.sync(workers=1, accept_replacements=True).total("modified") == 1
