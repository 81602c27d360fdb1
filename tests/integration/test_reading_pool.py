"""Documents read by a pool of processes come to what one process reads, failures included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kbsync.engine import DEFAULT_CHUNKER
from kbsync.extract.registry import extractor_for
from kbsync.sources.files import FilesystemSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import SyncOptions, single, sync_sources
from kbsync.sync.reading import POOL_MIN_DOCUMENTS
from kbsync.testing import CountingEmbedder
from tests.reliability.harness import dump

DOCUMENTS = POOL_MIN_DOCUMENTS + 16


def _folder(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for i in range(DOCUMENTS):
        (docs / f"page-{i:03d}.md").write_text(
            f"# Page {i}\n\n" + " ".join(f"Sentence {j} of page {i} about lighthouses."
                                         for j in range(40)) + "\n\n## Keepers\n\nThey kept "
            f"the light {i} times.\n", encoding="utf-8")
    (docs / "broken.md").write_bytes(b"# Broken\n\n\xff\xfe not UTF-8 \xc3")  # read, with a warning
    (docs / "unreadable.md").write_text("secret", encoding="utf-8")
    (docs / "unreadable.md").chmod(0)
    return docs


def _sync(docs: Path, db: Path, workers: int) -> tuple[object, object]:
    store = SqliteStore(db)
    try:
        result = sync_sources([FilesystemSource(docs, name="docs")], store, CountingEmbedder(),
                              extractor_for, DEFAULT_CHUNKER,
                              SyncOptions(read_workers=workers, scratch_dir=db.parent))
    finally:
        store.close()
    return result, dump(db)


def test_a_pool_of_readers_syncs_exactly_what_one_process_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []

    class Counted(single.Readers):
        def __init__(self, workers: int, *args: Any) -> None:
            started.append(workers)
            super().__init__(workers, *args)

    monkeypatch.setattr(single, "Readers", Counted)
    docs = _folder(tmp_path)
    one, one_state = _sync(docs, tmp_path / "one.db", workers=1)
    assert started == []
    pool, pool_state = _sync(docs, tmp_path / "pool.db", workers=3)
    assert started == [3]
    assert pool_state == one_state
    a, b = one.sources[0], pool.sources[0]  # type: ignore[attr-defined]
    assert (b.documents, b.chunks, b.bytes_read, b.embeddings_computed) == (
        a.documents, a.chunks, a.bytes_read, a.embeddings_computed)
    assert sorted(b.failures) == sorted(a.failures)
    assert sorted(b.warnings) == sorted(a.warnings)
    assert one.diagnostics == pool.diagnostics  # type: ignore[attr-defined]
    assert b.documents["new"] >= DOCUMENTS
