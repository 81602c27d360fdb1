"""A sync's memory does not grow with the number of documents of a folder.

Measured with ``tracemalloc`` (Python's own allocations, so the figure is exact,
not a noisy resident size) on a folder of ``n`` and of ``4 n`` files: the peak
may grow only by what the run's report holds of each changed document (its key
and action), never by a whole-corpus listing, manifest or chunk index.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from kbsync.extract.registry import extractor_for
from kbsync.sources import FilesystemSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import BatchLimits, Chunker, sync_sources
from kbsync.testing import CountingEmbedder

CHUNKER = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
# What the report keeps of one changed document: its key and action (about 200 bytes
# here), with room to spare; a whole-corpus index costs several times more per document.
REPORT_BYTES = 400
# What the interpreter keeps for reuse (free lists of tuples and the like) grows
# with the work done up to a fixed bound, not with the folder.
SLACK = 256 * 1024


def _folder(root: Path, count: int) -> Path:
    for i in range(count):
        path = root / f"d{i // 20}" / f"doc-{i:05}.txt"
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
            sync_sources([FilesystemSource(root, name="docs")], store, CountingEmbedder(),
                         extractor_for, CHUNKER, batch=BatchLimits(documents=64),
                         spool_dir=tmp_path)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    finally:
        store.close()
    return peaks[0], peaks[1]


def test_a_sync_holds_no_whole_corpus_state_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pages of the manifest and of the scratch database well below the folder sizes,
    # as they are below the size of a real source.
    monkeypatch.setattr("kbsync.sync._MANIFEST_PAGE", 50, raising=False)
    monkeypatch.setattr("kbsync.scratch._PAGE", 50, raising=False)
    small, large = 150, 600
    _peaks(tmp_path, 5)  # what is loaded once (extractors, chunker tables) is not counted
    first_small, noop_small = _peaks(tmp_path, small)
    first_large, noop_large = _peaks(tmp_path, large)
    extra = large - small
    assert first_large - first_small < extra * REPORT_BYTES + SLACK, (first_small, first_large)
    # A no-op run reports no document: nothing may grow with the folder.
    assert noop_large - noop_small < SLACK, (noop_small, noop_large)
