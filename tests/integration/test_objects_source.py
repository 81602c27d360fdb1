"""fsspec's memory and local filesystems as object-store sources, synced for real."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from kbsync.errors import DocumentError
from kbsync.extract.registry import extractor_for
from kbsync.model import SourceItem
from kbsync.report import SourceResult
from kbsync.sources import ScanningSource, Source
from kbsync.sources.objects import ObjectStoreSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import CountingEmbedder

if os.environ.get("CI") != "true":
    pytest.importorskip("fsspec", reason="needs fsspec (pip install 'kbsync[fsspec]')")

import fsspec

CHUNKER = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
_folders = count()


def _an_hour_later() -> int:
    """A listing's clock an hour after the objects were written: their times are safely older
    than the listing, so the stat gate trusts them (one as new as the listing is racy)."""
    return time.time_ns() + 3600 * 10**9


def _text(n: int) -> bytes:
    return (f"Note {n} is about harbour number {n} and the pilot word p{n}q. " * 20).encode()


class Counted:
    """A source whose filesystem counts the objects it opens (what a sync downloaded)."""

    def __init__(self, source: ObjectStoreSource, monkeypatch: pytest.MonkeyPatch) -> None:
        self.source = source
        self.opened: list[str] = []
        fs = source.filesystem
        inner: Callable[..., Any] = fs.open

        def counting(path: str, *args: Any, **kwargs: Any) -> Any:
            self.opened.append(path)
            return inner(path, *args, **kwargs)

        monkeypatch.setattr(fs, "open", counting)


def _sync(source: Source, store: SqliteStore) -> SourceResult:
    return sync_sources([source], store, CountingEmbedder(), extractor_for,
                        CHUNKER).sources[0]


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any]]:
    """A fresh folder of fsspec's memory filesystem with five notes; removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/kb-test-{os.getpid()}-{next(_folders)}"
    for n in range(4):
        fs.pipe(f"{root}/notes/n{n}.md", _text(n))
    fs.pipe(f"{root}/readme.txt", _text(9))
    yield f"memory://{root}", fs
    fs.rm(root, recursive=True)


def test_a_memory_folder_syncs_and_an_unchanged_resync_opens_nothing(
        memory: tuple[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = memory
    counted = Counted(ObjectStoreSource(url, name="mem", clock=_an_hour_later), monkeypatch)
    assert isinstance(counted.source, ScanningSource)
    with closing(SqliteStore(tmp_path / "kb.db")) as store:
        first = _sync(counted.source, store)
        assert first.documents["new"] == 5
        assert len(counted.opened) == 5
        again = _sync(counted.source, store)
        assert again.documents["unchanged"] == 5
        assert len(counted.opened) == 5


def test_a_memory_folder_edit_deletion_and_rename_are_seen(
        memory: tuple[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, fs = memory
    root = url.removeprefix("memory://")
    counted = Counted(ObjectStoreSource(url, name="mem", clock=_an_hour_later), monkeypatch)
    with closing(SqliteStore(tmp_path / "kb.db")) as store:
        _sync(counted.source, store)
        fs.pipe(f"{root}/notes/n1.md", _text(1).replace(b"pilot", b"tugboat", 2))
        fs.rm(f"{root}/notes/n2.md")
        fs.mv(f"{root}/notes/n3.md", f"{root}/kept/n3.md")
        before = len(counted.opened)
        report = _sync(counted.source, store)
        assert report.documents["modified"] == 1
        assert report.documents["deleted"] == 1
        assert report.documents["moved"] == 1
        assert report.documents["unchanged"] == 2
        assert report.embeddings_computed > 0
        assert len(counted.opened) - before == 2  # the edit and the new key only
        assert set(store.manifest("mem")) == {"notes/n0.md", "notes/n1.md", "kept/n3.md",
                                              "readme.txt"}


def test_a_missing_memory_folder_deletes_nothing(
        memory: tuple[str, Any], tmp_path: Path) -> None:
    url, fs = memory
    with closing(SqliteStore(tmp_path / "kb.db")) as store:
        _sync(ObjectStoreSource(url, name="mem"), store)
        fs.rm(url.removeprefix("memory://"), recursive=True)
        report = _sync(ObjectStoreSource(url, name="mem"), store)
        assert not report.listing_complete
        assert report.documents.get("deleted", 0) == 0
        assert len(store.manifest("mem")) == 5
        assert url in report.failures[0][1]
    fs.mkdir(url.removeprefix("memory://"))  # for the fixture to remove


def test_a_local_folder_through_file_urls_uses_mtime_and_inode(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    for n in range(3):
        (docs / "sub" / f"f{n}.md").write_bytes(_text(n))
    (docs / ".hidden.md").write_bytes(_text(8))
    source = ObjectStoreSource(docs.as_uri(), name="local", clock=_an_hour_later)
    assert source.local_root == str(docs)
    listing = source.list()
    assert [i.key for i in listing.items] == ["sub/f0.md", "sub/f1.md", "sub/f2.md"]
    item = listing.items[0]
    st = (docs / "sub" / "f0.md").stat()
    assert item.stat is not None
    assert (item.stat.size, item.stat.inode) == (st.st_size, st.st_ino)
    assert abs(item.stat.mtime_ns - st.st_mtime_ns) < 1000  # fsspec gives seconds as a float
    assert item.locator == (docs / "sub" / "f0.md").as_uri()
    with closing(SqliteStore(tmp_path / "kb.db")) as store:
        assert _sync(source, store).documents["new"] == 3
        os.utime(docs / "sub" / "f1.md", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        again = _sync(source, store)
        assert again.documents["unchanged"] == 3  # read again, same bytes: metadata only
        assert again.bytes_read == len(_text(1))


def test_include_and_exclude_globs_pick_the_keys(memory: tuple[str, Any]) -> None:
    url, _ = memory
    source = ObjectStoreSource(url, include="notes/**", exclude=["**/n0.md"], name="mem")
    assert [i.key for i in source.list().items] == ["notes/n1.md", "notes/n2.md",
                                                    "notes/n3.md"]


def test_a_key_that_leads_out_of_the_root_is_not_read(memory: tuple[str, Any]) -> None:
    url, _ = memory
    source = ObjectStoreSource(url, name="mem")
    with pytest.raises(DocumentError, match="leads out"):
        source.read(SourceItem("../other/secret.md", f"{url}/../other/secret.md",
                               "text/markdown"))


def test_a_read_stops_past_the_cap(memory: tuple[str, Any]) -> None:
    url, fs = memory
    source = ObjectStoreSource(url, name="mem", max_bytes=100)
    listing = source.list()
    assert {e.key for e in listing.errors} == {"notes/n0.md", "notes/n1.md", "notes/n2.md",
                                               "notes/n3.md", "readme.txt"}
    fs.pipe(f"{url.removeprefix('memory://')}/small.txt", b"tiny")
    small, = source.list().items
    fs.pipe(f"{url.removeprefix('memory://')}/small.txt", b"x" * 500)  # grew since
    with pytest.raises(DocumentError, match="over the cap of 100 bytes"):
        source.read(small)
