"""The checks of stored values, pure (norms, the wording of what they find) and on the
MemoryStore, which checks and searches as the SQL stores do."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kbsync.embed import norm_of
from kbsync.embed.hashing import HashingEmbedder
from kbsync.extract.registry import extractor_for
from kbsync.model import ANY_NORM, NORM_TOLERANCE, UNIT_NORM, VectorNorm
from kbsync.store.values import LISTED, Damage, DamagedVector, lines, summary
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource, MemoryStore

CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32})


def test_a_norm_holds_within_its_stated_tolerance_and_nan_or_infinity_never() -> None:
    norms = np.array([1.0, 1 + NORM_TOLERANCE / 2, 1 - 2 * NORM_TOLERANCE, 0.0, 8000.0,
                      np.nan, np.inf])
    assert UNIT_NORM.unsound(norms).tolist() == [False, False, True, True, True, True, True]
    assert VectorNorm(1.0, zero=True).unsound(norms).tolist() == [
        False, False, True, False, True, True, True]
    assert ANY_NORM.unsound(norms).tolist() == [False] * 5 + [True, True]


def test_embedders_say_the_norm_of_their_vectors() -> None:
    hashing = HashingEmbedder(64)
    assert norm_of(hashing) == VectorNorm(1.0, zero=True)
    vectors = hashing.embed(["harbour light keeper", "", "the and of"])
    assert not norm_of(hashing).unsound(np.linalg.norm(vectors, axis=1)).any()
    assert norm_of(CountingEmbedder(8)) == norm_of(hashing)
    assert norm_of(object()) == ANY_NORM  # one that does not say: finite only


def test_what_verify_says_of_many_damaged_values_is_a_line_each_up_to_a_limit() -> None:
    damage = Damage(vectors=tuple(DamagedVector(f"{n:064x}", "model:8", 2.0)
                                  for n in range(LISTED + 5)))
    said = lines(damage, UNIT_NORM)
    assert len(said) == LISTED + 1
    assert said[0] == (f"vector of chunk {0:012x} (model:8): norm 2, where the embedder's is 1 "
                       "(damaged)")
    assert said[-1] == "and 5 more damaged vectors"
    assert summary(damage) == f"verify found damaged values: {LISTED + 5} vectors"


def _synced() -> tuple[MemoryStore, CountingEmbedder]:
    store, embedder = MemoryStore(), CountingEmbedder(dimension=8)
    source = MemorySource({f"doc{i}.txt": f"alpha{i} beta{i} gamma{i} delta {i}. ".encode() * 20
                           for i in range(4)})
    sync_sources([source], store, embedder, extractor_for, CHUNKER)
    return store, embedder


@pytest.mark.parametrize("value", [1000.0, float("nan")])
def test_a_memory_store_finds_a_damaged_vector_and_never_ranks_it(value: float) -> None:
    store, embedder = _synced()
    digest, owner = next(iter(store._s.vectors))
    store._s.vectors[(digest, owner)] = np.full(8, value, dtype=np.float32)
    found = store.verify(embedder.identity, None, norm=norm_of(embedder))
    assert len(found) == 1
    assert found[0].startswith(f"vector of chunk {digest[:12]}")
    assert store.known_damage() == "verify found damaged values: 1 vectors"
    query = embedder.embed(["alpha0 beta0"])[0]
    near = store.search_vector(embedder.identity, query, 100, norm=norm_of(embedder))
    sharing = sum(c.digest == digest for d in store._s.documents.values()
                  for c in d.current.chunks)
    assert near.unsound == sharing  # every chunk of that text
    assert digest not in {h.digest for h in near.hits}
    assert len(near.hits) == sum(len(d.current.chunks) for d in store._s.documents.values()) \
        - sharing
    discarded = store.discard_damaged(embedder.identity, None, norm=norm_of(embedder))
    assert discarded.vectors == 1
    assert store.unembedded("memory", embedder.identity).keys() == {digest}


def test_a_memory_store_finds_damaged_texts_and_forgets_what_it_discards() -> None:
    store, embedder = _synced()
    digest = next(iter(store._s.texts))
    store._s.texts[digest] += " tampered"
    key = ("memory", "doc1.txt")
    doc = store._s.documents[key]
    store._s.documents[key] = replace(doc, current=replace(doc.current, text="tampered"))
    found = store.verify(embedder.identity, CHUNKER.text_chunker().identity)
    assert found == [f"chunk {digest[:12]}: its digest does not match its text (damaged)",
                     "memory:doc1.txt: the text of its current version (generation 1) does "
                     "not match its checksum (damaged)"]
    discarded = store.discard_damaged(embedder.identity, CHUNKER.text_chunker().identity)
    assert (discarded.chunk_texts, discarded.current, discarded.previous) == (1, 1, 0)
    assert store.manifest("memory")["doc1.txt"].stat is None  # read again by the next sync
    source = MemorySource({f"doc{i}.txt": f"alpha{i} beta{i} gamma{i} delta {i}. ".encode() * 20
                           for i in range(4)})
    sync_sources([source], store, embedder, extractor_for, CHUNKER)
    assert store.verify(embedder.identity, CHUNKER.text_chunker().identity) == []
    assert store.known_damage() is None
