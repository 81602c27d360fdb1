"""MemoryStore keeps SqliteStore's semantics where a random sync rarely goes (see also
tests/integration/test_memory_store_equivalence.py)."""

from __future__ import annotations

import numpy as np
import pytest

from kbsync.core.plan import Action, DocumentPlan
from kbsync.extract.registry import extractor_for
from kbsync.store import (
    EmbeddingCache,
    Erasures,
    Frontier,
    Maintenance,
    Manifest,
    Meta,
    Mirror,
    RecordStore,
    RunLog,
    SearchIndex,
)
from kbsync.store.rows import held_meta_name
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource, MemoryStore

CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32})


def _synced(n: int = 4) -> tuple[MemoryStore, CountingEmbedder]:
    store, embedder = MemoryStore(), CountingEmbedder(dimension=8)
    source = MemorySource({f"doc{i}.txt": f"alpha{i} beta{i} gamma{i} delta {i}".encode() * 20
                           for i in range(n)})
    sync_sources([source], store, embedder, extractor_for, CHUNKER)
    return store, embedder


def test_a_memory_store_plays_every_role_of_a_record_store() -> None:
    store = MemoryStore()
    for role in (Manifest, EmbeddingCache, SearchIndex, Mirror, RunLog, Meta, Erasures,
                 Maintenance, RecordStore, Frontier):
        assert isinstance(store, role)


def test_an_exception_inside_a_batch_leaves_the_store_as_it_was() -> None:
    store, _ = _synced()
    before = (store.manifest("memory"), list(store.chunk_digests("memory")), store.status())

    def writes_then_fails() -> None:
        with store.batch():
            store.apply("memory", DocumentPlan("doc1.txt", Action.DELETED), {}, "e", "now")
            store.set_meta("left", "behind")
            store.put_vectors("e", {"d": np.ones(8, dtype=np.float32)})
            raise RuntimeError("a failure midway")

    with pytest.raises(RuntimeError):
        writes_then_fails()
    assert (store.manifest("memory"), list(store.chunk_digests("memory")),
            store.status()) == before
    assert store.get_meta("left") is None


def test_a_nested_batch_commits_with_the_outer_one() -> None:
    store, _ = _synced()

    def nested_then_interrupted() -> None:
        with store.batch():
            with store.batch():
                store.set_meta("inner", "1")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        nested_then_interrupted()
    assert store.get_meta("inner") is None


def test_deleting_a_document_forgets_the_replacement_held_for_it() -> None:
    store, _ = _synced()
    store.set_meta(held_meta_name("memory", "doc2.txt"), "some text hash")
    store.apply("memory", DocumentPlan("doc2.txt", Action.DELETED), {}, "e", "now")
    assert store.get_meta(held_meta_name("memory", "doc2.txt")) is None


def test_the_cache_keeps_the_first_vector_of_a_digest_and_embedder() -> None:
    store = MemoryStore()
    store.put_vectors("e", {"d": np.ones(4, dtype=np.float32)})
    store.put_vectors("e", {"d": np.zeros(4, dtype=np.float32)})
    store.put_vectors("f", {"d": np.zeros(2, dtype=np.float32)})
    assert store.vectors("e", ["d", "x"])["d"].tolist() == [1.0] * 4
    assert store.cached("f", ["d", "x"]) == {"d"}
    assert store.embedder_dimensions() == {"e": 4, "f": 2}


def test_a_manifest_comes_in_key_order_and_in_pages() -> None:
    store, _ = _synced(5)
    assert list(store.manifest("memory")) == [f"doc{i}.txt" for i in range(5)]
    assert list(store.manifest("memory", "doc1.txt", 2)) == ["doc2.txt", "doc3.txt"]
    assert store.manifest("other") == {}


def test_erasing_removes_the_documents_their_vectors_and_their_keys_in_run_reports() -> None:
    store, embedder = _synced()
    digests = {d for k, d in store.chunk_digests("memory") if k == "doc3.txt"}
    assert '"doc3.txt"' in str(store.runs()[0].report).replace("'", '"')
    assert store.erase("doc3*") == [("memory", "doc3.txt")]
    assert "doc3.txt" not in store.manifest("memory")
    assert store.cached(embedder.identity, digests) == set()
    assert "doc3.txt" not in str(store.runs()[0].report)


def test_a_context_window_grows_within_the_section_up_to_the_budget() -> None:
    store, _ = _synced(1)
    hit = store.search_text("gamma0", 1)[0]
    window = store.window(hit, 10_000)
    doc = store.document("doc0.txt")
    assert doc is not None
    assert window.first == 0
    assert window.text == doc.text[:len(window.text)]
    assert store.window(hit, 0).text == hit.text


def test_verify_of_a_sound_memory_store_finds_nothing() -> None:
    store, embedder = _synced()
    assert MemoryStore().verify("e", None) == []
    assert store.verify(embedder.identity, CHUNKER.text_chunker().identity) == []
