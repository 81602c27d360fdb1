"""Vectors reach the embedding cache in commits of about a second of embedding, and all of
them by the time embedding stops, however it stops.

The step uses the embedding cache only, so its fake is the cache alone."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pytest

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import ChunkDraft, DocumentVersion, Plan, plan
from kbsync.model import SourceStat
from kbsync.sync.collect import CACHE_BYTES
from kbsync.sync.embedding import EMBED_BATCH, embed_plan
from kbsync.sync.tally import SourceTally
from kbsync.testing import CountingEmbedder, MemoryEmbeddingCache


class Commits(MemoryEmbeddingCache):
    """An embedding cache that remembers the size of each commit."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[int] = []

    def put_vectors(self, embedder: str,
                    vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        self.commits.append(len(vectors))
        super().put_vectors(embedder, vectors)


class Ticking:
    """A clock that moves on by ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _plan(chunks: int) -> Plan:
    drafts = tuple(ChunkDraft(f"d{i:04d}", f"text number {i}", 0, None, 0, 1, 3, "primary",
                              embedding_text_key(f"text number {i}"))
                   for i in range(chunks))
    version = DocumentVersion("a.txt", "a.txt", "text/plain", SourceStat(1, 1, 1), "b", "t",
                              "d", None, "{}", "x", drafts)
    return plan("s", {}, ["a.txt"], [version])


def test_vectors_are_committed_about_once_a_second_and_all_by_the_end() -> None:
    store, out = Commits(), SourceTally(source="s")
    the_plan = _plan(10 * EMBED_BATCH)
    embed_plan(the_plan, CountingEmbedder(8), out, None, cache=store, keep=False,
               clock=Ticking(0.3))  # each batch "takes" 0.3 s
    assert sum(store.commits) == out.embeddings_computed == 10 * EMBED_BATCH
    assert len(store.commits) < 10
    assert store.cached(CountingEmbedder(8).identity, the_plan.to_embed) == set(the_plan.to_embed)


def test_a_fast_embedder_commits_once_the_vectors_held_reach_a_bound_in_bytes() -> None:
    # The clock never moves: on a fast machine a second holds any number of vectors,
    # and what a sync holds must not grow with them (nor with the embedder's dimension).
    dimension = 256
    per_vector = dimension * 4
    store = Commits()
    embed_plan(_plan(4 * CACHE_BYTES // per_vector), CountingEmbedder(dimension),
               SourceTally(source="s"), None, cache=store, keep=False, clock=lambda: 0.0)
    assert len(store.commits) >= 4
    assert max(store.commits) * per_vector <= CACHE_BYTES + EMBED_BATCH * per_vector


def test_a_zero_interval_commits_every_batch() -> None:
    store = Commits()
    embed_plan(_plan(3 * EMBED_BATCH), CountingEmbedder(8), SourceTally(source="s"), None,
               cache=store, keep=False, cache_seconds=0)
    assert store.commits == [EMBED_BATCH] * 3


class Interrupted(CountingEmbedder):
    """An embedder interrupted (Ctrl-C) at its ``at``-th call."""

    def __init__(self, at: int) -> None:
        super().__init__(8)
        self.at = at

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:  # type: ignore[override]
        if self.calls + 1 == self.at:
            raise KeyboardInterrupt
        return super().embed(texts)


def test_an_interrupted_embedding_commits_what_it_computed_on_its_way_out() -> None:
    store, out = Commits(), SourceTally(source="s")
    with pytest.raises(KeyboardInterrupt):
        embed_plan(_plan(5 * EMBED_BATCH), Interrupted(at=4), out, None, cache=store,
                   keep=False, cache_seconds=3600)
    assert store.commits == [3 * EMBED_BATCH]
    assert out.embeddings_computed == 3 * EMBED_BATCH
