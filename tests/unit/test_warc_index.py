"""The scans of unchanged WARC files are kept between listings, and only theirs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("warcio", reason="needs warcio (pip install 'kbsync[warc]')")

from kbsync.sources.warc.source import WarcSource
from tests.warc_files import WarcFile, page_html

DAY1 = "2024-01-01T00:00:00Z"


def _crawl(path: Path, text: str, *, age: float = 60.0) -> None:
    with WarcFile(path) as w:
        w.page("https://example.com/p", page_html("P", text), DAY1)
        w.page("https://example.com/q", page_html("Q", "Another page."), DAY1)
    settled = time.time() - age
    os.utime(path, (settled, settled))


def _forge(path: Path, data: bytes, mtime_ns: int) -> None:
    """Other bytes of the same size and modification time: only a rescan would see them."""
    path.write_bytes(data[:path.stat().st_size].ljust(path.stat().st_size, b"\0"))
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_an_unchanged_file_is_not_scanned_again_and_a_changed_one_is(tmp_path: Path) -> None:
    (tmp_path / ".kbsync").mkdir()
    crawl = tmp_path / "crawl.warc.gz"
    _crawl(crawl, "The first text.")
    source = WarcSource([str(crawl)], index_dir=tmp_path / ".kbsync" / "warc-index")
    first = source.list()
    assert len(list((tmp_path / ".kbsync" / "warc-index").iterdir())) == 1
    mtime = crawl.stat().st_mtime_ns
    _forge(crawl, b"garbage", mtime)
    assert source.list() == first  # the kept scan: the forged bytes were never read
    os.utime(crawl, ns=(mtime + 10**9, mtime + 10**9))
    again = source.list()
    assert not again.complete  # the new time: scanned again, and found broken
    assert not again.items


def test_a_file_just_written_or_scanned_with_errors_is_not_kept(tmp_path: Path) -> None:
    (tmp_path / ".kbsync").mkdir()
    index = tmp_path / ".kbsync" / "warc-index"
    fresh = tmp_path / "fresh.warc.gz"
    _crawl(fresh, "Still being written.", age=0.0)
    WarcSource([str(fresh)], index_dir=index).list()
    assert not index.exists()
    broken = tmp_path / "broken.warc.gz"
    _crawl(broken, "Cut short.")
    broken.write_bytes(broken.read_bytes()[:-50])
    os.utime(broken, (time.time() - 60, time.time() - 60))
    assert not WarcSource([str(broken)], index_dir=index).list().complete
    assert not index.exists() or not list(index.iterdir())


def test_nothing_is_written_for_a_knowledge_base_never_synced(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl.warc.gz"
    _crawl(crawl, "Planned only.")
    WarcSource([str(crawl)], index_dir=tmp_path / ".kbsync" / "warc-index").list()
    assert not (tmp_path / ".kbsync").exists()


def test_a_kept_scan_that_cannot_be_read_is_scanned_again(tmp_path: Path) -> None:
    (tmp_path / ".kbsync").mkdir()
    index = tmp_path / ".kbsync" / "warc-index"
    crawl = tmp_path / "crawl.warc.gz"
    _crawl(crawl, "Kept, then spoiled.")
    source = WarcSource([str(crawl)], index_dir=index)
    first = source.list()
    [kept] = index.iterdir()
    kept.write_text('{"format": 1, "file": "x"')
    assert source.list() == first
