"""A big document costs memory in proportion to its size, with a small factor.

Measured with ``tracemalloc`` (Python's and NumPy's allocations, not a resident
size that depends on the allocator or on SQLite's page cache, which is bounded by
its settings): a first sync of one text file of a few megabytes allocates at most
:data:`FACTOR` times the file at its peak. What a sync must hold at once is the
file's text (the bytes are dropped once decoded) and its chunks (their texts,
digests and offsets: about twice the text), plus a few sets of digests; a
whole-text word scan (some fifteen bytes of arrays a character), vectors held
for every chunk (four kilobytes each for a 1024-dimensional embedder) or the
observation pickled whole into the scratch database would each break it.
"""

from __future__ import annotations

import random
import sqlite3
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from kbsync.embed.hashing import HashingEmbedder
from kbsync.engine import DEFAULT_CHUNKER
from kbsync.extract.registry import extractor_for
from kbsync.model import ChangeReport
from kbsync.sources.files import FilesystemSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import BatchLimits, SyncOptions, sync_sources

FACTOR = 6
COMPARE_FACTOR = 30
# A very long text: both versions' canonical bytes, one canonical text while it is made,
# and the chunks of both.
LONG_COMPARE_FACTOR = 7
SIZE = 5_000_000
WORDS = ("harbor", "retry", "backoff", "the", "a", "of", "configuration", "queue", "sync",
         "document", "worker", "index", "vector", "lighthouse", "bread", "city", "night")


def _prose(path: Path, size: int) -> None:
    rng = random.Random(5)
    paragraphs: list[str] = []
    written = 0
    while written < size:
        paragraph = ". ".join(" ".join(rng.choices(WORDS, k=rng.randint(6, 18)))
                              for _ in range(rng.randint(3, 7))) + "."
        paragraphs.append(paragraph)
        written += len(paragraph) + 2
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")


def test_syncing_a_big_text_file_allocates_a_small_multiple_of_its_size(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    _prose(folder / "big.txt", SIZE)
    size = (folder / "big.txt").stat().st_size
    store = SqliteStore(tmp_path / "kb.db")
    try:
        tracemalloc.start()
        try:
            # No commit by the clock: the worst case, a machine that embeds the whole file
            # within one commit interval (the peak must not depend on the machine's speed).
            options = SyncOptions(scratch_dir=tmp_path,
                                  batch=BatchLimits(cache_seconds=float("inf")))
            result = sync_sources([FilesystemSource(folder, name="docs", max_bytes=2 * size)],
                                  store, HashingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                                  options=options)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.sources[0].documents["new"] == 1
        assert store.status().documents == 1
    finally:
        store.close()
    assert peak <= FACTOR * size, f"peak {peak / 1e6:.0f} MB for a {size / 1e6:.0f} MB file"


def _compare_an_insertion(tmp_path: Path) -> tuple[ChangeReport, int, str]:
    """The report of a 2 MB text and the same with a few words inserted in its middle,
    the peak of Python's allocations while it was made, and the new text."""
    from kbsync.core.compare import compare

    _prose(tmp_path / "old.txt", 2_000_000)
    old = (tmp_path / "old.txt").read_text(encoding="utf-8")
    new = old[:1_000_000] + " a few words inserted " + old[1_000_000:]
    tracemalloc.start()
    try:
        report = compare(old, new)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return report, peak, new


def test_comparing_two_versions_of_a_big_text_allocates_a_small_multiple_of_it(
        tmp_path: Path) -> None:
    report, peak, new = _compare_an_insertion(tmp_path)
    assert report.changed
    # compare() still scans each whole version into word offset arrays (the word-exact
    # regions need them): about 18 times the text at the peak of one scan. The bound
    # keeps the byte CDC's whole-text hashing (53 times before) from coming back.
    assert peak <= COMPARE_FACTOR * len(new), (
        f"peak {peak / 1e6:.0f} MB for {len(new) / 1e6:.0f} MB")


def test_a_very_long_text_is_compared_by_its_chunks_in_a_small_multiple_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    # (the package's `compare` is the function; the module is in sys.modules)
    monkeypatch.setattr(sys.modules["kbsync.core.compare"], "WORD_REGIONS_LIMIT", 1_000_000)
    report, peak, new = _compare_an_insertion(tmp_path)
    assert report.changed
    assert report.similarity > 0.99
    assert (report.regions, report.removed_regions) == ((), ())
    assert peak <= LONG_COMPARE_FACTOR * len(new), (
        f"peak {peak / 1e6:.0f} MB for {len(new) / 1e6:.0f} MB")


def _synced_big_file(tmp_path: Path, size: int) -> tuple[Path, FilesystemSource, SqliteStore]:
    """A folder with one prose file of ``size`` bytes, synced into a fresh SQLite store."""
    folder = tmp_path / "docs"
    folder.mkdir()
    path = folder / "big.txt"
    _prose(path, size)
    source = FilesystemSource(folder, name="docs", max_bytes=4_000_000)
    store = SqliteStore(tmp_path / "kb.db")
    sync_sources([source], store, HashingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                 options=SyncOptions(scratch_dir=tmp_path))
    return path, source, store


def test_a_sync_compares_a_very_long_edit_with_the_stored_text_read_in_pieces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kbsync.store.sqlite.documents as sqlite_store
    import kbsync.sync.replacements

    monkeypatch.setattr(kbsync.sync.replacements, "WORD_REGIONS_LIMIT", 500_000)
    monkeypatch.setattr(sqlite_store, "BIG_TEXT", 200_000)  # stored through blob I/O
    path, source, store = _synced_big_file(tmp_path, 1_200_000)
    try:
        assert len(list(store.text_pieces("docs", "big.txt"))) > 1
        text = path.read_text(encoding="utf-8")
        path.write_text(text[:600_000] + " A sentence inserted. " + text[600_000:],
                        encoding="utf-8")
        report = sync_sources([source], store, HashingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                              options=SyncOptions(scratch_dir=tmp_path))
    finally:
        store.close()
    (change,) = [c.change for c in report.sources[0].changes if c.key == "big.txt"]
    assert report.total("modified") == 1
    assert change is not None
    assert change.similarity > 0.99
    assert (change.regions, change.removed_regions) == ((), ())


def _sqlite_largest_allocation() -> Callable[[], int] | None:
    """A reset of SQLite's record of its largest allocation, returning a reader of it, when
    the library Python uses can be reached (``sqlite3_status64``), else None."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("sqlite3")
    try:
        lib = ctypes.CDLL(name or "libsqlite3.so.0")
        lib.sqlite3_libversion.restype = ctypes.c_char_p
        if lib.sqlite3_libversion().decode() != sqlite3.sqlite_version:
            return None
    except (OSError, AttributeError):
        return None
    status = lib.sqlite3_status64
    status.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                       ctypes.POINTER(ctypes.c_int64), ctypes.c_int]

    def read(reset: int) -> int:
        current, highest = ctypes.c_int64(), ctypes.c_int64()
        status(5, ctypes.byref(current), ctypes.byref(highest), reset)  # SQLITE_STATUS_MALLOC_SIZE
        return highest.value

    read(1)
    return lambda: read(0)


def test_sqlite_never_holds_a_big_document_text_in_one_block(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    _prose(folder / "big.txt", 2_000_000)
    store = SqliteStore(tmp_path / "kb.db")
    try:
        largest = _sqlite_largest_allocation()
        if largest is None:
            pytest.skip("the SQLite library Python uses cannot be reached with ctypes here")
        sync_sources([FilesystemSource(folder, name="docs", max_bytes=4_000_000)], store,
                     HashingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                     options=SyncOptions(scratch_dir=tmp_path))
        block = largest()
        assert store.status().documents == 1
    finally:
        store.close()
    # Bound whole, the text was copied into one block of its size (and its row into another).
    assert block < 1_000_000, f"SQLite allocated {block / 1e6:.1f} MB at once"


def test_an_edit_of_a_big_text_never_makes_sqlite_hold_both_versions_at_once(
        tmp_path: Path) -> None:
    path, source, store = _synced_big_file(tmp_path, 2_000_000)
    try:
        data = path.read_bytes()
        middle = data.index(b". ", len(data) // 2) + 2
        path.write_bytes(data[:middle] + b"One sentence inserted. " + data[middle:])
        size = len(data)
        del data
        largest = _sqlite_largest_allocation()
        if largest is None:
            pytest.skip("the SQLite library Python uses cannot be reached with ctypes here")
        report = sync_sources([source], store, HashingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                              options=SyncOptions(scratch_dir=tmp_path))
        block = largest()
        doc = store.document("big.txt")
        assert report.total("modified") == 1
        assert doc is not None
        assert doc.previous is not None
        assert doc.previous.count("One sentence inserted.") + 1 == doc.text.count(
            "One sentence inserted.")
    finally:
        store.close()
    # One row held both texts, so moving the current text to "previous" built a record
    # of the two; and the comparison read the previous text it did not need.
    assert block < 1.5 * size, f"SQLite allocated {block / 1e6:.1f} MB at once"


def _store_contents(store: SqliteStore) -> dict[str, object]:
    db = sqlite3.connect(store.path)
    try:
        return {
            "texts": db.execute("SELECT generation, CAST(text AS TEXT) FROM versions "
                                "ORDER BY doc_id, generation").fetchall(),
            "chunks": db.execute('SELECT idx, digest, section, heading, start, "end", tokens, '
                                 "boundary, generation FROM chunks ORDER BY id").fetchall(),
            "chunk_texts": db.execute("SELECT * FROM chunk_texts ORDER BY digest").fetchall(),
            "embeddings": db.execute("SELECT * FROM embeddings ORDER BY digest").fetchall(),
            "documents": db.execute("SELECT key, size, bytes_hash, text_hash, title, generation "
                                    "FROM documents").fetchall(),
        }
    finally:
        db.close()


def _rechunk(text: str) -> dict[str, str]:
    return {c.identity: c.text for c in DEFAULT_CHUNKER.text_chunker().chunk(text).chunks}


def test_a_big_text_written_in_pieces_reads_back_as_the_one_written_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts over BIG_TEXT characters are written by blob I/O; every reader sees the
    same strings (UTF-8 beyond ASCII included) as for a text bound whole."""
    import kbsync.store.sqlite.documents as sqlite_store

    rng = random.Random(9)
    words = (*WORDS, "café", "naïve", "Straße", "日本語", "ελληνικά", "emoji🙂")
    text = "\n\n".join(". ".join(" ".join(rng.choices(words, k=12)) for _ in range(4)) + "."
                       for _ in range(6_000))
    assert len(text) > sqlite_store.BIG_TEXT
    assert not text.isascii()
    edited = text[: len(text) // 2] + " Straße inserted here. " + text[len(text) // 2 :]
    contents = []
    for way, bound in (("pieces", sqlite_store.BIG_TEXT), ("whole", 10**12)):
        monkeypatch.setattr(sqlite_store, "BIG_TEXT", bound)
        folder = tmp_path / way
        folder.mkdir()
        store = SqliteStore(tmp_path / f"{way}.db")
        try:
            for version in (text, edited):
                (folder / "big.txt").write_text(version, encoding="utf-8")
                sync_sources([FilesystemSource(folder, name="docs", max_bytes=10**8)], store,
                             HashingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                             options=SyncOptions(scratch_dir=tmp_path, accept_replacements=True))
            doc = store.document("big.txt")
            assert doc is not None
            assert doc.generation == 2
            hit = store.search_text("Straße inserted", 1)[0]
            window = store.window(hit, 400)
            assert window.text in doc.text
            assert "Straße inserted" in window.text
            assert store.verify(HashingEmbedder().identity, None) == []
            pieces = list(store.text_pieces("docs", "big.txt"))
            assert "".join(pieces) == doc.text
            assert len(pieces) > 1 if way == "pieces" else len(pieces) == 1
            kind = "blob" if way == "pieces" else "text"
            db = sqlite3.connect(store.path)
            try:
                assert db.execute("SELECT typeof(text) FROM versions"
                                  ).fetchall() == [(kind,), (kind,)]
                with db:
                    db.execute("DELETE FROM chunk_texts WHERE digest IN "
                               "(SELECT digest FROM chunks WHERE idx % 3 = 0)")
            finally:
                db.close()
            assert any("chunk texts" in line for line in store.repair(_rechunk))
            contents.append((doc.text, doc.previous, window, _store_contents(store)))
        finally:
            store.close()
    assert contents[0] == contents[1]


def test_a_context_window_of_a_long_document_copies_only_its_slice(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    _prose(folder / "long.txt", 300_000)
    store = SqliteStore(tmp_path / "kb.db")
    try:
        sync_sources([FilesystemSource(folder, name="docs")], store, HashingEmbedder(),
                     extractor_for, DEFAULT_CHUNKER, options=SyncOptions(scratch_dir=tmp_path))
        hit = store.search_text("lighthouse", 1)[0]
        tracemalloc.start()
        try:
            window = store.window(hit, 400)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        doc = store.document("long.txt")
    finally:
        store.close()
    assert doc is not None
    assert window.text in doc.text
    # Selected beside each of its few hundred chunk rows, the text was copied per row.
    assert peak <= 3 * 300_000, f"peak {peak / 1e6:.1f} MB for a 0.3 MB document"
