"""A generated crawl in WARC files synced into a real SQLite knowledge base, crawled again
with edits and deletions, through ``kbsync init``/``kbsync sync`` and the API."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

if os.environ.get("CI") != "true":
    pytest.importorskip("warcio", reason="needs warcio (pip install 'kbsync[warc]')")

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.sources.warc.source import WarcSource
from tests.warc_files import WarcFile, page_html

runner = CliRunner()
SITE = "https://docs.example.org"
DAY1, DAY2, DAY3 = "2024-03-01T08:00:00Z", "2024-03-02T08:00:00Z", "2024-04-01T08:00:00Z"
PAGES = {
    "tides": ("Tides", "Spring tides follow the new moon and the full moon."),
    "harbour": ("Harbour", "The harbour master assigns each berth before dawn."),
    "lamp": ("Lamp", "The lamp burns paraffin through a wick of woven cotton."),
    "keeper": ("Keeper", "The keeper climbs one hundred and twelve stairs nightly."),
    "fog": ("Fog", "A fog horn sounds twice every minute in thick weather."),
    "storm": ("Storm", "Storm signals are cones hoisted on the quay mast."),
}


def _first_crawl(crawl: Path) -> dict[str, str]:
    """Crawl 1 (gzip): every page, tides captured twice (the later one wins), a 503 of
    the harbour after its 200, robots.txt. Returns each page's payload digest."""
    digests: dict[str, str] = {}
    with WarcFile(crawl / "crawl1.warc.gz") as w:
        w.page(f"{SITE}/robots.txt", b"User-agent: *\n", DAY1, content_type="text/plain")
        w.page(f"{SITE}/tides", page_html("Tides", "An early draft about lagoons."), DAY1)
        for name, (title, text) in PAGES.items():
            digests[name] = w.page(f"{SITE}/{name}", page_html(title, text), DAY2,
                                   headers=[("ETag", f'"{name}-1"')])
        w.page(f"{SITE}/harbour", b"busy", "2024-03-02T09:00:00Z", status="503 Busy",
               content_type="text/plain")
    return digests


def _second_crawl(crawl: Path, digests: dict[str, str], *, malformed: bool = False) -> None:
    """Crawl 2 (a plain .warc): fog edited, lamp gone (410), storm a lone 404, the
    others unchanged (revisit records); ``malformed`` puts a broken record first."""
    with WarcFile(crawl / "crawl2.warc", gzip=False) as w:
        if malformed:
            w.raw(b"WARC/1.0 but not a header line\r\n\r\nnor a record\r\n\r\n")
        w.page(f"{SITE}/fog", page_html("Fog", "A fog horn sounds three times every "
                                        "minute in thick weather."), DAY3)
        w.page(f"{SITE}/lamp", b"Gone", DAY3, status="410 Gone", content_type="text/plain")
        w.page(f"{SITE}/storm", b"Not found", DAY3, status="404 Not Found",
               content_type="text/plain")
        for name in ("tides", "harbour", "keeper"):
            w.revisit(f"{SITE}/{name}", digests[name], DAY3, refers_date=DAY2)


def _sync(folder: Path, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, ["sync", "-c", str(folder), "--json"])
    assert result.exit_code == code, result.output  # 4: a document had a problem
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _counts(report: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in report["documents"].items() if v}


def _source(report: dict[str, Any]) -> dict[str, Any]:
    [source] = report["sources"]
    return dict(source)


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    """A knowledge base made by ``kbsync init 'crawl/*.warc*'`` over a first crawl."""
    (tmp_path / "crawl").mkdir()
    result = runner.invoke(app, ["init", "crawl/*.warc*", "--folder", str(tmp_path),
                                 "--embedder", "hashing"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "kbsync.toml").read_text()
    assert 'kind = "warc"' in text
    assert 'paths = ["crawl/*.warc*"]' in text
    return tmp_path


def _search(folder: Path, query: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["search", query, "-k", "3", "-c", str(folder), "--json",
                                 "--mode", "text"])
    assert result.exit_code == 0, result.output
    hits: list[dict[str, Any]] = json.loads(result.stdout)["hits"]
    return hits


def test_a_crawl_syncs_then_its_second_crawl_edits_and_deletes(kb: Path) -> None:
    digests = _first_crawl(kb / "crawl")
    first = _sync(kb)
    assert _counts(first) == {"new": 6}
    assert _source(first)["listing_complete"]
    hits = _search(kb, "spring tides new moon")
    assert hits
    assert hits[0]["key"] == f"{SITE}/tides"
    assert not _search(kb, "lagoons")  # the earlier capture of tides lost to the later
    assert any("harbour master" in h["text"] for h in _search(kb, "harbour master berth"))

    again = _sync(kb)
    assert _counts(again) == {"unchanged": 6}
    assert _source(again)["bytes_read"] == 0  # the stat gate: nothing read

    _second_crawl(kb / "crawl", digests)
    second = _sync(kb, 4)
    assert _counts(second) == {"modified": 1, "deleted": 1, "unchanged": 3, "failed": 1}
    source = _source(second)
    assert source["bytes_read"] == len(page_html(
        "Fog", "A fog horn sounds three times every minute in thick weather."))
    [failure] = source["failures"]
    assert failure["key"] == f"{SITE}/storm"
    assert "HTTP 404" in failure["message"]
    assert _search(kb, "three times every minute")[0]["key"] == f"{SITE}/fog"
    assert not _search(kb, "paraffin wick")
    assert _search(kb, "cones hoisted quay")[0]["key"] == f"{SITE}/storm"  # kept

    last = _sync(kb, 4)  # the lone 404 is still unconfirmed
    assert _counts(last) == {"unchanged": 4, "failed": 1}
    assert _source(last)["bytes_read"] == 0


def test_a_malformed_record_in_the_second_crawl_holds_its_deletions(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    digests = _first_crawl(crawl)
    with KnowledgeBase.create(tmp_path, ["warc+crawl"], embedder={"kind": "hashing"}) as kb:
        assert [(s.name, s.kind) for s in kb.config.sources] == [("crawl", "warc")]
        assert kb.sync().total("new") == 6
        _second_crawl(crawl, digests, malformed=True)
        result = kb.sync().sources[0]
        assert not result.listing_complete
        assert result.documents["modified"] == 1  # what could be read is taken
        assert result.documents["deleted"] == 0
        assert result.deletions_held == 1  # the lamp's 410 waits for a complete listing
        assert any(f"{(crawl / 'crawl2.warc').as_uri()}: a malformed record at offset 0"
                   in message for _, message in result.failures)
        assert kb.status().documents == 6
        second = {"warc_file": (crawl / "crawl2.warc").as_uri()}  # the record's metadata
        assert [h.key for h in kb.search("fog horn", k=3, mode="text", filters=second)] == [
            f"{SITE}/fog"]


def test_a_page_no_file_captures_any_more_is_deleted(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    with WarcFile(crawl / "a.warc.gz") as w:
        w.page(f"{SITE}/kept", page_html("Kept", "Captured in the file that stays."), DAY1)
    with WarcFile(crawl / "b.warc.gz") as w:
        w.page(f"{SITE}/dropped", page_html("Dropped", "Captured in the file removed."), DAY1)
    with KnowledgeBase.create(tmp_path, ["crawl/*.warc.gz"], embedder={"kind": "hashing"}) as kb:
        assert kb.sync().total("new") == 2
        (crawl / "b.warc.gz").unlink()
        assert kb.sync().sources[0].documents["deleted"] == 1
        (crawl / "a.warc.gz").unlink()  # no file at all: incomplete, nothing deleted
        result = kb.sync().sources[0]
        assert not result.listing_complete
        assert result.documents["deleted"] == 0
        assert kb.status().documents == 1


def test_the_files_are_the_shards_and_their_scans_merge_into_the_listing(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    digests = _first_crawl(crawl)
    _second_crawl(crawl, digests)
    source = WarcSource([str(crawl / "*.warc*")])
    shards = source.shards()
    assert [Path(f).name for f in shards.files] == ["crawl1.warc.gz", "crawl2.warc"]
    from kbsync.sources.warc.captures import merge

    scans = [source.scan_shard(f) for f in reversed(shards.files)]  # in any order
    assert merge(scans, media_types=source.media_types) == source.list()
