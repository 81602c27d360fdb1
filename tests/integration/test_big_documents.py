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
import tracemalloc
from pathlib import Path

import pytest

from kbsync.embed.hashing import HashingEmbedder
from kbsync.engine import DEFAULT_CHUNKER
from kbsync.extract.registry import extractor_for
from kbsync.sources import FilesystemSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import sync_sources

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
            result = sync_sources([FilesystemSource(folder, name="docs", max_bytes=2 * size)],
                                  store, HashingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                                  scratch_dir=tmp_path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.sources[0].documents["new"] == 1
        assert store.status().documents == 1
    finally:
        store.close()
    assert peak <= FACTOR * size, f"peak {peak / 1e6:.0f} MB for a {size / 1e6:.0f} MB file"


def test_comparing_two_versions_of_a_big_text_allocates_a_small_multiple_of_it(
        tmp_path: Path) -> None:
    from kbsync.compare import compare

    _prose(tmp_path / "old.txt", 2_000_000)
    old = (tmp_path / "old.txt").read_text(encoding="utf-8")
    new = old[:1_000_000] + " a few words inserted " + old[1_000_000:]
    tracemalloc.start()
    try:
        report = compare(old, new)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.changed
    # compare() still scans each whole version into word offset arrays (the word-exact
    # regions need them): about 18 times the text at the peak of one scan. The bound
    # keeps the byte CDC's whole-text hashing (53 times before) from coming back.
    assert peak <= COMPARE_FACTOR * len(new), (
        f"peak {peak / 1e6:.0f} MB for {len(new) / 1e6:.0f} MB")


def test_a_very_long_text_is_compared_by_its_chunks_in_a_small_multiple_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from kbsync.compare import compare

    # (the package's `compare` is the function; the module is in sys.modules)
    monkeypatch.setattr(sys.modules["kbsync.compare"], "WORD_REGIONS_LIMIT", 1_000_000)
    _prose(tmp_path / "old.txt", 2_000_000)
    old = (tmp_path / "old.txt").read_text(encoding="utf-8")
    new = old[:1_000_000] + " a few words inserted " + old[1_000_000:]
    tracemalloc.start()
    try:
        report = compare(old, new)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.changed
    assert report.similarity > 0.99
    assert (report.regions, report.removed_regions) == ((), ())
    assert peak <= LONG_COMPARE_FACTOR * len(new), (
        f"peak {peak / 1e6:.0f} MB for {len(new) / 1e6:.0f} MB")
