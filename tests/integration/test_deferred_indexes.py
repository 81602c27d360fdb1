"""PostgreSQL's HNSW and GIN indexes on a first load: built after it, in every driver, and
after a sync that died midway by the next one; grown row by row afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbsync.extract.registry import extractor_for
from kbsync.store.postgres import PostgresStore
from kbsync.sync import Chunker, SyncOptions, sync_sources
from kbsync.sync.options import BatchLimits
from kbsync.sync.parallel import sync_parallel
from kbsync.testing import CountingEmbedder, MemorySource
from tests.conftest import Backend

CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                           "backup_bits": 2})
INDEXES = {"chunk_texts_tsv", "embeddings_hnsw_16"}


@pytest.fixture
def store(postgres_url: str, tmp_path: Path) -> Iterator[PostgresStore]:
    backend = Backend("postgres", postgres_url)
    opened = backend.open(tmp_path)
    assert isinstance(opened, PostgresStore)
    try:
        yield opened
    finally:
        opened.close()
        backend.drop()


def _source(count: int, word: str = "harbour") -> MemorySource:
    return MemorySource({f"d{i:02}.txt": f"{word} lamp {i} stairs wick {i} keeper".encode() * 30
                         for i in range(count)})


def _indexes(store: PostgresStore) -> set[str]:
    return {str(r[0]) for r in store._conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")} & INDEXES


def _deferred(store: PostgresStore) -> set[str]:
    return {str(r[0]) for r in store._conn.execute(
        "SELECT name FROM meta WHERE name LIKE 'index_deferred:%'")}


class _Watch:
    """Which of the indexes exist each time a document's plan is applied."""

    def __init__(self, store: PostgresStore, monkeypatch: pytest.MonkeyPatch,
                 fail_after: int | None = None) -> None:
        self.seen: list[set[str]] = []
        apply = store.apply

        def watched(*args: Any, **kwargs: Any) -> None:
            if fail_after is not None and len(self.seen) == fail_after:
                raise KeyboardInterrupt  # Ctrl-C midway through the load
            self.seen.append(_indexes(store))
            apply(*args, **kwargs)

        monkeypatch.setattr(store, "apply", watched)


def _sync(store: PostgresStore, source: MemorySource, **options: Any) -> None:
    sync_sources([source], store, CountingEmbedder(dimension=16), extractor_for, CHUNKER,
                 options=SyncOptions(batch=BatchLimits(documents=4, first=4), **options))


def test_a_first_sync_in_one_process_builds_the_indexes_after_the_load(
        store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    watch = _Watch(store, monkeypatch)
    _sync(store, _source(10))
    assert len(watch.seen) == 10
    assert watch.seen == [set()] * 10  # none grown row by row
    assert _indexes(store) == INDEXES
    assert _deferred(store) == set()


def test_later_syncs_grow_the_indexes_as_they_write(
        store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _sync(store, _source(4))
    watch = _Watch(store, monkeypatch)
    _sync(store, _source(8, "pier"))
    assert watch.seen
    assert all(seen == INDEXES for seen in watch.seen)
    assert _deferred(store) == set()


def test_a_first_sync_stopped_midway_leaves_searches_answering_and_the_next_sync_builds(
        store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _source(10)
    watch = _Watch(store, monkeypatch, fail_after=6)
    with pytest.raises(KeyboardInterrupt):
        _sync(store, source)
    monkeypatch.undo()
    assert store.status().documents == 4  # the first batch is in
    assert _indexes(store) == set()
    assert _deferred(store) == {"index_deferred:text", "index_deferred:16"}
    embedder = CountingEmbedder(dimension=16)
    assert store.search_text("lamp keeper", 3)  # by a scan
    assert store.search_vector(embedder.identity, embedder.embed(["lamp"])[0], 3).hits
    watch = _Watch(store, monkeypatch)
    _sync(store, source)
    assert watch.seen
    assert all(seen == set() for seen in watch.seen)  # still deferred
    assert _indexes(store) == INDEXES
    assert _deferred(store) == set()
    assert store.status().documents == 10


def test_a_parallel_first_sync_builds_both_indexes_once_its_workers_are_done(
        store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    watch = _Watch(store, monkeypatch)
    sync_parallel([_source(10)], store, CountingEmbedder(dimension=16), extractor_for, CHUNKER)
    assert len(watch.seen) == 10
    assert all(seen == set() for seen in watch.seen)
    assert _indexes(store) == INDEXES
    assert _deferred(store) == set()


def test_an_index_found_missing_is_built_by_the_next_sync(store: PostgresStore) -> None:
    _sync(store, _source(4))
    store._conn.execute("DROP INDEX chunk_texts_tsv")
    _sync(store, _source(4))
    assert _indexes(store) == INDEXES
