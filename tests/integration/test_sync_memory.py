"""A sync's memory does not grow with the number of documents of a folder.

Measured with ``tracemalloc`` (Python's own allocations, not a resident size
that depends on the allocator) on a folder of ``n`` and of ``10 n`` files, with the
pages of the manifest, of the scratch database and of the report's lists well
below ``n``, as they are below the size of a real source.
"""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kbsync.embed import Vectors
from kbsync.extract.registry import extractor_for
from kbsync.sources.files import FilesystemSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import BatchLimits, Chunker, SyncOptions, sync_sources
from kbsync.testing import CountingEmbedder

CHUNKER = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
# What the interpreter keeps for reuse (free lists of tuples and the like) and
# the state of its allocator make peaks vary by some hundreds of KB from run to
# run, whatever the size. A whole-corpus listing, manifest or chunk index costs
# over 1 KB a file: over 2 MB between these folders.
SLACK = 1024 * 1024


class _UncachedEmbedder(CountingEmbedder):
    """Vectors from a checksum of the text: no cache of words, which would grow with the
    distinct words of the folder (bounded, but far above these folders' sizes)."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [np.random.default_rng(zlib.crc32(t.encode())).random(self.dimension)
                for t in texts]
        return np.array(rows, dtype=np.float32).reshape(len(texts), self.dimension)


def _folder(root: Path, count: int) -> Path:
    for i in range(count):
        path = root / f"d{i // 40}" / f"doc-{i:05}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"Document {i} is about subject {i}. " * 12
                        + f"\n\nIt ends with its own word w{i}q.", encoding="utf-8")
    return root


def _peaks(tmp_path: Path, count: int) -> tuple[int, int]:
    """Peak traced bytes of a first sync and of a no-op re-sync of ``count`` files."""
    root = _folder(tmp_path / f"docs-{count}", count)
    store = SqliteStore(tmp_path / f"kb-{count}.db")
    peaks = []
    try:
        for _ in range(2):
            tracemalloc.start()
            sync_sources([FilesystemSource(root, name="docs")], store, _UncachedEmbedder(),
                         extractor_for, CHUNKER,
                         options=SyncOptions(batch=BatchLimits(documents=64), scratch_dir=tmp_path))
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    finally:
        store.close()
    return peaks[0], peaks[1]


def test_a_sync_holds_no_whole_corpus_state_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kbsync.sync.listing._MANIFEST_PAGE", 50)
    monkeypatch.setattr("kbsync.sync.scratch._PAGE", 50)
    monkeypatch.setattr("kbsync.sync.tally.REPORT_LIMIT", 50)
    small, large = 200, 2000
    _peaks(tmp_path, 20)  # what is loaded once (extractors, chunker tables) is not counted
    first_small, noop_small = _peaks(tmp_path, small)
    first_large, noop_large = _peaks(tmp_path, large)
    assert first_large - first_small < SLACK, (first_small, first_large)
    assert noop_large - noop_small < SLACK, (noop_small, noop_large)


def test_a_report_names_the_first_changes_and_counts_every_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kbsync.sync.tally.REPORT_LIMIT", 3)
    root = _folder(tmp_path / "docs", 7)
    store = SqliteStore(tmp_path / "kb.db")
    try:
        result = sync_sources([FilesystemSource(root, name="docs")], store, CountingEmbedder(),
                              extractor_for, CHUNKER, options=SyncOptions(scratch_dir=tmp_path))
        [recorded] = store.runs()
    finally:
        store.close()
    [source] = result.sources
    assert result.total("new") == 7
    assert [c.key for c in source.changes] == ["d0/doc-00000.txt", "d0/doc-00001.txt",
                                               "d0/doc-00002.txt"]
    assert source.omitted == {"changes": 4}
    assert recorded.report["sources"][0]["omitted"] == {"changes": 4}
