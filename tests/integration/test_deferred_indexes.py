"""PostgreSQL's HNSW and GIN indexes: built at the end of a sync (the GIN index after a
first load, the HNSW index of a dimension once it has more than ``ann_above`` vectors), in
every driver, and after a sync that died midway by the next one; grown row by row
afterwards, and never dropped. Below ``ann_above`` vector searches are exact."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from kbsync.extract.registry import extractor_for
from kbsync.store import Hit
from kbsync.store.filters import Filters, parse_where
from kbsync.store.postgres import PostgresStore
from kbsync.store.postgres.connection import shown
from kbsync.sync import Chunker, SyncOptions, sync_sources
from kbsync.sync.options import BatchLimits
from kbsync.sync.parallel import sync_parallel
from kbsync.testing import CountingEmbedder, MemorySource
from tests.conftest import Backend

CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                           "backup_bits": 2})
INDEXES = {"chunk_texts_tsv", "embeddings_hnsw_16"}


@pytest.fixture
def backend(postgres_url: str) -> Iterator[Backend]:
    found = Backend("postgres", postgres_url)
    try:
        yield found
    finally:
        found.drop()


@pytest.fixture
def store(backend: Backend) -> Iterator[PostgresStore]:
    """A store that builds the HNSW index above one vector: on every first load."""
    opened = PostgresStore(backend.url, schema=backend.schema(), ann_above=1)
    try:
        yield opened
    finally:
        opened.close()


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
    assert _deferred(store) == {"index_deferred:text"}
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


# -- ann_above: exact below it, the index built once by the sync that crosses it ----------

EMBEDDER = CountingEmbedder(dimension=16)
QUERIES = ("harbour lamp", "pier stairs keeper", "wick 3")


def _vector_count(store: PostgresStore) -> int:
    return int(store._conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])


def _exact(store: PostgresStore, query: str, k: int,
           filters: Filters | None = None) -> list[tuple[str, int, float]]:
    """The best ``k`` chunks by the inner product, every chunk compared (in NumPy)."""
    chunks = list(store.indexed_chunks(filters=filters))
    vectors = store.vectors(EMBEDDER.identity, [c.digest for c in chunks])
    target = EMBEDDER.embed([query])[0]
    scored = sorted((-float(np.dot(target, vectors[c.digest])), c.key, c.index) for c in chunks)
    return [(key, index, -score) for score, key, index in scored[:k]]


def _ranked(hits: list[Hit]) -> list[tuple[str, int, float]]:
    return [(h.key, h.index, round(h.score, 4)) for h in hits]


def _searches(store: PostgresStore) -> list[list[tuple[str, int, float]]]:
    return [_ranked(store.search_vector(EMBEDDER.identity, EMBEDDER.embed([q])[0], 5, where).hits)
            for q in QUERIES for where in (None, parse_where(["path=d0*"]))]


def test_below_ann_above_no_vector_index_is_built_and_searches_compare_every_vector(
        backend: Backend) -> None:
    store = PostgresStore(backend.url, schema=backend.schema(), ann_above=100_000)
    _sync(store, _source(10))
    assert _indexes(store) == {"chunk_texts_tsv"}
    for query in QUERIES:
        for where in (None, parse_where(["path=d0*"])):
            hits = store.search_vector(EMBEDDER.identity, EMBEDDER.embed([query])[0], 5,
                                       where).hits
            want = _exact(store, query, 5, where)
            assert [h.score for h in hits] == pytest.approx([s for _, _, s in want], abs=1e-4)
    assert store.status().vector_search == (
        f"{_vector_count(store)} vectors of 16 dimensions: exact search (the index is built at "
        "the end of the sync that takes them past ann_above = 100,000)",)
    store.close()


def test_the_sync_that_takes_a_dimension_past_ann_above_builds_its_index_once_at_its_end(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = backend.schema()
    first = PostgresStore(backend.url, schema=schema)
    _sync(first, _source(4))
    below = _vector_count(first)
    first.close()
    store = PostgresStore(backend.url, schema=schema, ann_above=below)
    _sync(store, _source(4))  # nothing new: still at the threshold, not above it
    assert _indexes(store) == {"chunk_texts_tsv"}
    builds: list[str] = []
    build = store._build

    def counted(name: str) -> None:
        builds.append(name)
        build(name)

    monkeypatch.setattr(store, "_build", counted)
    watch = _Watch(store, monkeypatch)
    _sync(store, _source(10))
    assert _vector_count(store) > below
    assert watch.seen
    assert all(seen == {"chunk_texts_tsv"} for seen in watch.seen)
    assert _indexes(store) == INDEXES
    assert builds == ["16"]
    _sync(store, _source(10, "pier"))
    assert builds == ["16"]  # grown since, not built again
    assert store.status().vector_search == (
        f"{_vector_count(store)} vectors of 16 dimensions: HNSW index",)
    indexed = _searches(store)
    store._conn.execute("DROP INDEX embeddings_hnsw_16")
    assert _searches(store) == indexed  # the same hits as an exact search
    store.close()


def test_a_dimension_that_falls_below_ann_above_keeps_its_index(store: PostgresStore) -> None:
    _sync(store, _source(10))
    assert _indexes(store) == INDEXES
    store.ann_above = _vector_count(store) + 1
    _sync(store, _source(1), allow_mass_delete=True)
    store.gc()
    assert _vector_count(store) < store.ann_above
    assert _indexes(store) == INDEXES


def test_ann_above_zero_builds_no_vector_index(backend: Backend) -> None:
    store = PostgresStore(backend.url, schema=backend.schema(), ann_above=0)
    _sync(store, _source(10))
    assert _indexes(store) == {"chunk_texts_tsv"}
    assert store.status().vector_search == (
        f"{_vector_count(store)} vectors of 16 dimensions: exact search (no index: "
        "ann_above = 0)",)
    store.close()


def test_verify_names_a_dimension_past_ann_above_without_its_index_and_repair_builds_it(
        store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _Watch(store, monkeypatch, fail_after=6)
    with pytest.raises(KeyboardInterrupt):
        _sync(store, _source(10))  # stopped before its end, where the index is built
    monkeypatch.undo()
    count = _vector_count(store)
    problems = store.verify(EMBEDDER.identity, None)
    assert [p for p in problems if "HNSW" in p] == [
        f"{shown(store.url)}: {count} vectors of 16 dimensions, above ann_above = 1, have no HNSW "
        "index (a sync that crossed it stopped before its end), so vector searches compare "
        "them all; the next sync builds it at its end, as `kbsync verify --repair` does"]
    with store.lock():  # a sync writing now builds it at its end: nothing to say yet
        assert not [p for p in store.verify(EMBEDDER.identity, None) if "HNSW" in p]
    assert store.repair(lambda text: {}) == [
        f"built the HNSW index of the {count} vectors of 16 dimensions"]
    assert "embeddings_hnsw_16" in {str(r[0]) for r in store._conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
    assert store.verify(EMBEDDER.identity, None) == []
