"""Edits within one timestamp tick are seen: a stat as new as the listing that took it is
racy, and the next sync compares the file's bytes (git's "racily clean" rule).

File systems with 1-second timestamps are simulated: every write is stamped with a whole
second (``os.utime``), and the source's clock says when each listing begins. Nothing
here depends on the real time.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kbsync.extract.registry import extractor_for
from kbsync.report import SourceResult
from kbsync.sources.files import FilesystemSource
from kbsync.sources.objects import ObjectStoreSource
from kbsync.store import RecordStore
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, SyncOptions, sync_sources
from kbsync.testing import CountingEmbedder, MemoryStore

SECOND = 10**9
START = 1_700_000_000 * SECOND  # a whole second: what a 1-second file system stamps
WORDS = ("alpha", "gamma", "delta", "omega", "sigma", "kappa")  # all of one length


class Clock:
    """The time a listing begins, in nanoseconds since the epoch, as the test sets it."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


def _write(path: Path, word: str, second: int) -> None:
    """Write the note naming ``word``, stamped with the whole ``second`` (ns)."""
    path.write_text(f"The harbour pilot's code word this week is {word}.\n")
    os.utime(path, ns=(second, second))


def _sync(source: FilesystemSource | ObjectStoreSource, store: RecordStore,
          **options: bool) -> SourceResult:
    return sync_sources([source], store, CountingEmbedder(), extractor_for, Chunker(),
                        SyncOptions(**options)).sources[0]


def _found(store: RecordStore, word: str) -> bool:
    return any(hit.key == "note.md" for hit in store.search_text(word, 5))


def _same_second_rewrites(root: Path, store: RecordStore, clock: Clock,
                          source: FilesystemSource | ObjectStoreSource) -> int:
    """Five trials of: write, sync, a rewrite of the same size within the same second,
    a plain sync. How many times that sync found the new text."""
    note = root / "note.md"
    seen = 0
    for trial in range(5):
        second = START + trial * 100 * SECOND
        old, new = WORDS[trial], WORDS[trial + 1]
        _write(note, old, second)
        clock.now = second + SECOND // 3  # the sync reads it within the same second
        _sync(source, store)
        assert _found(store, old)
        _write(note, new, second)  # same size, same second: the stat does not change
        clock.now = second + 2 * SECOND // 3
        _sync(source, store)
        seen += _found(store, new) and not _found(store, old)
    return seen


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    return folder


def test_five_of_five_same_second_rewrites_are_seen_by_a_plain_sync(
        docs: Path, store: SqliteStore | PostgresStore) -> None:
    clock = Clock()
    source = FilesystemSource(docs, name="docs", clock=clock)
    assert _same_second_rewrites(docs, store, clock, source) == 5


def test_five_of_five_same_second_rewrites_are_seen_with_the_memory_store(docs: Path) -> None:
    clock = Clock()
    store = MemoryStore()
    source = FilesystemSource(docs, name="docs", clock=clock)
    assert _same_second_rewrites(docs, store, clock, source) == 5


def test_same_second_rewrites_of_an_object_store_folder_are_seen(docs: Path,
                                                                  tmp_path: Path) -> None:
    pytest.importorskip("fsspec", reason="needs fsspec (pip install 'kbsync[fsspec]')")
    clock = Clock()
    with closing(SqliteStore(tmp_path / "kb.db")) as store:
        source = ObjectStoreSource(docs.as_uri(), name="files", clock=clock)
        assert _same_second_rewrites(docs, store, clock, source) == 5


def _seconds_store(stamp: Clock, etags: bool) -> Any:
    """fsspec's memory store answering as an object store whose Last-Modified has 1-second
    resolution (the second ``stamp`` says), with or without ETags of the content."""
    from fsspec.implementations.memory import MemoryFileSystem

    class SecondsStore(MemoryFileSystem):  # type: ignore[misc]
        def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False,
                 detail: bool = False, **kwargs: Any) -> Any:
            found = super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=True,
                                 **kwargs)
            for name, info in found.items():
                info.pop("created", None)
                info["LastModified"] = datetime.fromtimestamp(stamp.now // SECOND, UTC)
                if etags and info.get("type") == "file":
                    info["ETag"] = hashlib.md5(self.cat_file(name)).hexdigest()
            return found if detail else list(found)

    return SecondsStore(skip_instance_cache=True)


@pytest.mark.parametrize("etags", [False, True])
def test_same_second_rewrites_of_objects_with_second_resolution_times_are_seen(
        tmp_path: Path, etags: bool) -> None:
    pytest.importorskip("fsspec", reason="needs fsspec (pip install 'kbsync[fsspec]')")
    clock, stamp = Clock(), Clock()
    fs = _seconds_store(stamp, etags)
    root = f"/kb-racy-{os.getpid()}-{etags}"
    source = ObjectStoreSource(f"memory://{root}", name="bucket", filesystem=fs, clock=clock)
    seen = 0
    try:
        with closing(SqliteStore(tmp_path / "kb.db")) as store:
            for trial in range(5):
                stamp.now = START + trial * 100 * SECOND
                old, new = WORDS[trial], WORDS[trial + 1]
                fs.pipe(f"{root}/note.md", f"The code word is {old}.".encode())
                clock.now = stamp.now + SECOND // 3
                [item] = source.list().items
                assert item.stat is not None
                assert item.stat.racy is not etags  # an ETag is never racy
                _sync(source, store)
                fs.pipe(f"{root}/note.md", f"The code word is {new}.".encode())
                clock.now = stamp.now + 2 * SECOND // 3
                _sync(source, store)
                seen += _found(store, new) and not _found(store, old)
    finally:
        fs.rm(root, recursive=True)
    assert seen == 5


def test_a_racy_stat_is_trusted_again_once_a_sync_records_it_no_longer_racy(
        docs: Path, store: SqliteStore | PostgresStore) -> None:
    clock = Clock()
    source = FilesystemSource(docs, name="docs", clock=clock)
    note = docs / "note.md"
    _write(note, "alpha", START)
    size = note.stat().st_size
    clock.now = START + SECOND // 2
    assert _sync(source, store).documents["new"] == 1
    [racy] = store.manifest("docs").values()
    assert racy.stat is not None
    assert racy.stat.racy
    clock.now = START + SECOND  # still within the window: read, found the same, no write
    again = _sync(source, store)
    assert (again.bytes_read, again.documents["unchanged"]) == (size, 1)
    clock.now = START + 60 * SECOND  # long after the write: read once more, then recorded
    later = _sync(source, store)
    assert (later.bytes_read, later.documents["unchanged"]) == (size, 1)
    [trusted] = store.manifest("docs").values()
    assert trusted.stat is not None
    assert not trusted.stat.racy
    clock.now = START + 120 * SECOND
    assert _sync(source, store).bytes_read == 0  # the stat gate skips it again


def test_a_sync_counts_the_documents_it_reads_again_only_for_a_racy_stat(
        docs: Path, store: SqliteStore | PostgresStore) -> None:
    clock = Clock()
    source = FilesystemSource(docs, name="docs", clock=clock)
    _write(docs / "note.md", "alpha", START)
    _write(docs / "old.md", "gamma", START - 3600 * SECOND)
    clock.now = START + SECOND // 2
    assert _sync(source, store).racy_rereads == 0  # nothing stored to compare with
    clock.now = START + SECOND  # note.md's stat is the same, but racy: read again
    again = _sync(source, store)
    assert (again.racy_rereads, again.documents["unchanged"]) == (1, 2)
    assert again.bytes_read == (docs / "note.md").stat().st_size
    clock.now = START + 60 * SECOND  # listed trusted, but stored racy: read once more
    assert _sync(source, store).racy_rereads == 1
    clock.now = START + 120 * SECOND
    assert _sync(source, store).racy_rereads == 0
    _write(docs / "note.md", "delta", START + 120 * SECOND)
    assert _sync(source, store, verify=True).racy_rereads == 0  # verify reads all anyway


def test_verify_and_a_plain_sync_agree_on_a_racy_file(docs: Path, tmp_path: Path) -> None:
    clock = Clock()
    with closing(SqliteStore(tmp_path / "kb.db")) as store:
        source = FilesystemSource(docs, name="docs", clock=clock)
        _write(docs / "note.md", "alpha", START)
        clock.now = START + SECOND // 2
        _sync(source, store)
        _write(docs / "note.md", "gamma", START)
        clock.now = START + SECOND
        assert _sync(source, store, verify=True).documents["modified"] == 1
        assert _found(store, "gamma")


# -- a file caught while it is written -----------------------------------------------------


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqliteStore]:
    with closing(SqliteStore(tmp_path / "kb.db")) as opened:
        yield opened


def test_a_new_file_caught_between_truncation_and_write_is_left_for_the_next_sync(
        docs: Path, sqlite_store: SqliteStore) -> None:
    clock = Clock()
    source = FilesystemSource(docs, name="docs", clock=clock)
    note = docs / "note.md"
    note.write_bytes(b"")  # opened for writing, nothing written yet
    os.utime(note, ns=(START, START))
    clock.now = START + SECOND // 2
    first = _sync(source, sqlite_store)
    assert sqlite_store.manifest("docs") == {}  # not indexed empty
    assert first.documents["held"] == 1
    assert first.failures == ()
    assert [w for w in first.warnings if w.startswith("note.md: is empty")]
    _write(note, "alpha", START + SECOND)  # the write lands
    clock.now = START + 2 * SECOND
    second = _sync(source, sqlite_store)
    assert second.documents["new"] == 1  # its real text at once, not held as a replacement
    assert _found(sqlite_store, "alpha")


def test_an_empty_file_written_long_before_the_listing_is_indexed(
        docs: Path, sqlite_store: SqliteStore) -> None:
    clock = Clock()
    note = docs / "empty.md"
    note.write_bytes(b"")
    os.utime(note, ns=(START, START))
    clock.now = START + 60 * SECOND
    report = _sync(FilesystemSource(docs, name="docs", clock=clock), sqlite_store)
    assert report.documents["new"] == 1
    assert list(sqlite_store.manifest("docs")) == ["empty.md"]


class _Rewritten(FilesystemSource):
    """A folder source whose files are rewritten after the listing, before they are read."""

    def __init__(self, root: Path, clock: Clock) -> None:
        super().__init__(root, name="docs", clock=clock)
        self.rewrites: dict[str, bytes] = {}

    def read(self, item: object) -> bytes:
        from kbsync.model import SourceItem

        assert isinstance(item, SourceItem)
        if item.key in self.rewrites:
            Path(item.locator).write_bytes(self.rewrites.pop(item.key))
        return super().read(item)


def test_a_file_changed_after_the_listing_keeps_its_stored_version_until_the_next_sync(
        docs: Path, sqlite_store: SqliteStore) -> None:
    clock = Clock()
    source = _Rewritten(docs, clock)
    note = docs / "note.md"
    _write(note, "alpha", START)
    clock.now = START + 60 * SECOND
    _sync(source, sqlite_store)
    _write(note, "gamma", START + 100 * SECOND)
    source.rewrites["note.md"] = b"The harbour pilot's code word this week is truncat"
    clock.now = START + 200 * SECOND
    report = _sync(source, sqlite_store)
    assert report.documents["held"] == 1
    assert report.failures == ()
    assert any("changed after it was listed" in w for w in report.warnings)
    assert _found(sqlite_store, "alpha")  # the stored version stays; nothing half-read
    clock.now = START + 300 * SECOND
    assert _sync(source, sqlite_store).documents["modified"] == 1
    assert _found(sqlite_store, "truncat")


def test_a_held_replacement_stays_held_through_a_sync_that_found_the_file_changing(
        docs: Path, sqlite_store: SqliteStore) -> None:
    clock = Clock()
    source = _Rewritten(docs, clock)
    note = docs / "note.md"
    _write(note, "alpha", START)
    clock.now = START + 60 * SECOND
    _sync(source, sqlite_store)
    wall = b"Sign-in required: session expired. Log in again, please."
    note.write_bytes(wall)  # a login wall where the note was: held until seen twice
    os.utime(note, ns=(START + 100 * SECOND, START + 100 * SECOND))
    clock.now = START + 200 * SECOND
    assert _sync(source, sqlite_store).documents["held"] == 1
    source.rewrites["note.md"] = wall  # written again (the same bytes) after the listing
    clock.now = START + 300 * SECOND
    changing = _sync(source, sqlite_store)
    assert changing.documents["held"] == 1
    assert any("changed after it was listed" in w for w in changing.warnings)
    clock.now = START + 400 * SECOND
    # The second sync to read the wall confirms it: the one that could not read it
    # did not forget that it had been seen once.
    assert _sync(source, sqlite_store).documents["modified"] == 1
    assert _found(sqlite_store, "session")
