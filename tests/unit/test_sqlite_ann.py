"""The embedded store's approximate vector index: its candidates re-scored exactly equal the
exact top k on clustered vectors, it never returns a deleted or edited chunk, filtered
searches lose nothing, and without FAISS the exact scan answers."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from kbsync.embed import Vectors
from kbsync.extract.registry import extractor_for
from kbsync.model import UNIT_NORM, VectorNorm
from kbsync.store import Hit
from kbsync.store.filters import filters_from
from kbsync.store.kinds import SqliteSettings
from kbsync.store.sqlite import SqliteStore
from kbsync.store.sqlite import ann as ann_module
from kbsync.store.sqlite import search as search_module
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import MemorySource

faiss = pytest.importorskip("faiss")

DIMENSION = 32
CHUNKS = 3_000
ABOVE = 1_000  # the index's threshold, lowered from its default for a small store
K = 10
CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32})


def _clustered(rows: int, seed: int) -> Vectors:
    """Unit vectors around 60 topic centres: the neighbour structure of text embeddings
    (chunks near the others of their topic), where random vectors have none."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, DIMENSION)).astype(np.float32)
    out = centres[rng.integers(0, len(centres), rows)] + 0.45 * rng.standard_normal(
        (rows, DIMENSION)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


class TableEmbedder:
    """Embeds a text naming ``v<N>`` as row N of a table of vectors."""

    identity = "table:32"
    dimension = DIMENSION
    max_input_tokens = None
    norm: VectorNorm = UNIT_NORM

    def __init__(self, table: Vectors) -> None:
        self.table = table

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [int(m.group(1)) if (m := re.search(r"v(\d+)", t)) else 0 for t in texts]
        return self.table[rows]


def _folder(n: int) -> str:
    # 1% of the documents under "narrow/", half under "wide/"
    return "narrow" if n % 100 == 0 else "wide" if n % 2 else "rest"


def _documents(rows: Sequence[int]) -> dict[str, bytes | None]:
    return {f"{_folder(n)}/d{n}.txt": f"v{n}".encode() for n in rows}


@pytest.fixture(scope="module")
def table() -> Vectors:
    return _clustered(CHUNKS + 200, seed=3)


@pytest.fixture
def synced(tmp_path: Path, table: Vectors) -> Iterator[tuple[SqliteStore, MemorySource]]:
    source = MemorySource(_documents(range(CHUNKS)))
    store = SqliteStore(tmp_path / "kb.db", ann_above=ABOVE)
    sync_sources([source], store, TableEmbedder(table), extractor_for, CHUNKER)
    yield store, source
    store.close()


def _exact(store: SqliteStore, query: Vectors, k: int = K, **filters: object) -> list[Hit]:
    exact = SqliteStore(store.path, ann_above=0)
    try:
        return exact.search_vector(TableEmbedder.identity, query, k,
                                   filters_from(filters) if filters else None,
                                   norm=UNIT_NORM).hits
    finally:
        exact.close()


def _near(store: SqliteStore, query: Vectors, k: int = K, **filters: object) -> list[Hit]:
    return store.search_vector(TableEmbedder.identity, query, k,
                               filters_from(filters) if filters else None, norm=UNIT_NORM).hits


def _keys(hits: Sequence[Hit]) -> list[str]:
    return [h.key for h in hits]


def test_the_index_re_scored_finds_the_exact_top_ten_on_clustered_vectors(
        synced: tuple[SqliteStore, MemorySource], table: Vectors) -> None:
    store, _ = synced
    assert store.prepare_vector_index(TableEmbedder.identity, UNIT_NORM)
    found = shared = 0
    for query in table[CHUNKS:CHUNKS + 40]:
        near, exact = _near(store, query), _exact(store, query)
        exact_scores = {h.key: h.score for h in exact}
        # every score is the exact one, whatever the index's own vectors said
        for hit in near:
            row = int(hit.text[1:])
            assert hit.score == pytest.approx(float(query @ table[row]), abs=1e-5)
            assert hit.key not in exact_scores or hit.score == pytest.approx(exact_scores[hit.key])
        found += len(near)
        shared += len(set(_keys(near)) & set(_keys(exact)))
    assert found == 40 * K
    assert shared / found >= 0.95  # recall@10 after the re-score


def test_a_search_below_the_threshold_builds_no_index(tmp_path: Path, table: Vectors) -> None:
    store = SqliteStore(tmp_path / "kb.db", ann_above=ABOVE)
    sync_sources([MemorySource(_documents(range(ABOVE - 1)))], store, TableEmbedder(table),
                 extractor_for, CHUNKER)
    assert not store.prepare_vector_index(TableEmbedder.identity, UNIT_NORM)
    assert _keys(_near(store, table[CHUNKS])) == _keys(_exact(store, table[CHUNKS]))
    store.close()


def test_a_deleted_or_edited_chunk_never_comes_back_from_the_index(
        synced: tuple[SqliteStore, MemorySource], table: Vectors) -> None:
    store, source = synced
    embedder = TableEmbedder(table)
    assert store.prepare_vector_index(TableEmbedder.identity, UNIT_NORM)
    deleted, edited = "wide/d7.txt", "wide/d9.txt"
    assert _keys(_near(store, table[7], 1)) == [deleted]
    assert _keys(_near(store, table[9], 1)) == [edited]
    del source.documents[deleted]
    source.documents[edited] = f"v{CHUNKS + 100}".encode()  # its vector moves elsewhere
    for _ in range(2):  # a text that shares nothing with its last is confirmed by a 2nd sync
        sync_sources([source], store, embedder, extractor_for, CHUNKER)
    assert deleted not in _keys(_near(store, table[7], 50))
    assert _keys(_near(store, table[7], K)) == _keys(_exact(store, table[7]))
    assert _keys(_near(store, table[CHUNKS + 100], 1)) == [edited]
    near = _near(store, table[9], 50)
    assert edited not in _keys(near[:1])
    assert all(h.text != "v9" for h in near)
    # the index was brought in step, not built again: it holds the new vector under its id
    built = store._ann._built[TableEmbedder.identity]
    assert len(built.ids) == CHUNKS - 1 == built.faiss_index.ntotal


def test_a_filtered_search_finds_the_exact_top_k_of_the_matching_chunks(
        synced: tuple[SqliteStore, MemorySource], table: Vectors) -> None:
    store, _ = synced
    assert store.prepare_vector_index(TableEmbedder.identity, UNIT_NORM)
    for query in table[CHUNKS:CHUNKS + 10]:
        # 1%: fewer than the threshold, scanned exactly
        narrow = _near(store, query, path="narrow/*")
        assert _keys(narrow) == _keys(_exact(store, query, path="narrow/*"))
        # half: the index, asked for matching candidates only
        wide = _near(store, query, path="wide/*")
        assert len(wide) == K
        assert all(h.key.startswith("wide/") for h in wide)
        assert len(set(_keys(wide)) & set(_keys(_exact(store, query, path="wide/*")))) >= 9
    # a k above what the index's lists hold among the matches: scanned exactly, all found
    everything = _near(store, table[CHUNKS], 1_400, path="wide/*")
    assert _keys(everything) == _keys(_exact(store, table[CHUNKS], 1_400, path="wide/*"))


def test_without_faiss_the_exact_scan_answers_and_a_big_store_hints_once(
        synced: tuple[SqliteStore, MemorySource], table: Vectors,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    store, _ = synced
    monkeypatch.setattr(search_module, "ann_available", lambda: False)
    monkeypatch.setattr(ann_module, "ann_available", lambda: False)
    monkeypatch.setattr(search_module, "_hinted", False)
    with caplog.at_level(logging.WARNING, logger="kbsync.store"):
        assert not store.prepare_vector_index(TableEmbedder.identity, UNIT_NORM)
        for query in table[CHUNKS:CHUNKS + 3]:
            assert _keys(_near(store, query)) == _keys(_exact(store, query))
    hints = [r.getMessage() for r in caplog.records]
    assert len(hints) == 1
    assert "kbsync[ann]" in hints[0]
    assert "3,000 chunks" in hints[0]
    assert not store._ann._built


def test_the_threshold_is_a_setting_of_the_store_whose_default_is_the_index_s() -> None:
    assert SqliteSettings().ann_above == ann_module.ANN_ABOVE
    assert SqliteSettings(ann_above=0).ann_above == 0


def test_a_first_search_scans_exactly_while_the_index_builds_in_a_thread(
        synced: tuple[SqliteStore, MemorySource], table: Vectors) -> None:
    store, _ = synced
    query = table[CHUNKS]
    assert _keys(_near(store, query)) == _keys(_exact(store, query))
    building = store._ann._building.get(TableEmbedder.identity)
    if building is not None:  # else already built
        building.join()
    assert TableEmbedder.identity in store._ann._built
    assert len(set(_keys(_near(store, query))) & set(_keys(_exact(store, query)))) >= 9


def test_an_index_that_cannot_be_built_leaves_the_exact_scan_and_is_not_tried_again(
        synced: tuple[SqliteStore, MemorySource], table: Vectors,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    store, _ = synced
    tries = []

    def failing(matrix: Vectors, ids: list[int]) -> None:
        tries.append(len(ids))
        raise MemoryError("cannot allocate 390 MB")

    monkeypatch.setattr(ann_module, "_train", failing)
    with caplog.at_level(logging.WARNING, logger="kbsync.store"):
        assert not store.prepare_vector_index(TableEmbedder.identity, UNIT_NORM)
        for query in table[CHUNKS:CHUNKS + 3]:
            assert _keys(_near(store, query)) == _keys(_exact(store, query))
    assert tries == [CHUNKS]
    assert [r.getMessage() for r in caplog.records] == [
        "the approximate vector index could not be built (cannot allocate 390 MB); "
        "searches scan exactly"]
