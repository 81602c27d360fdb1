"""Searching a knowledge base: vector, full text or both fused, each hit grown into a window.

A :class:`Searcher` is the store, the vector index and the embedder a search needs,
made for one call: :class:`~kbsync.app.knowledge_base.KnowledgeBase` may swap its store
(a rebuild), so it holds none of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from kbsync.app.fusion import (
    FUSION_DEPTH,
    Fusion,
    fuse,
    ranked,
    reranked,
    text_relevance,
    vector_relevance,
)
from kbsync.core.normalize import normalize
from kbsync.embed import Embedder, LexicalEmbedder, QueryEmbedder, Reranker, norm_of
from kbsync.errors import ParameterError
from kbsync.model import SEARCH_MODES, SearchMode
from kbsync.store import Hit, Nearest, SearchIndex
from kbsync.store.filters import Filters
from kbsync.sync.vector_index import VectorIndex

__all__ = ["SEARCH_MODES", "SearchMode", "SearchResults", "Searcher", "distinct",
           "unsound_warning"]


class SearchResults(list[Hit]):
    """A search's hits, best first (a list, as searches always returned), and what the
    search warns of: ``warnings``, each one line (damaged vectors left out, a store known
    to be damaged), said once per search however many chunks it concerns."""

    def __init__(self, hits: Iterable[Hit] = (), warnings: Sequence[str] = (),
                 unsound: int = 0) -> None:
        super().__init__(hits)
        self.warnings: tuple[str, ...] = tuple(warnings)
        #: How many chunks the search left out because their vector is damaged.
        self.unsound = unsound


def unsound_warning(count: int) -> str:
    """The warning of a search that left out ``count`` chunks whose vector is damaged."""
    chunks = "1 chunk whose vector is" if count == 1 else f"{count:,} chunks whose vectors are"
    return (f"left out {chunks} damaged (not finite, or not of the embedder's norm): "
            "`kbsync verify --repair` embeds them again")


@dataclass(frozen=True)
class Searcher:
    """The parts one search reads: the store's full text and windows, the vector index, the
    embedder of the query."""

    store: SearchIndex
    index: VectorIndex
    embedder: Embedder
    reranker: Reranker | None = None
    """Reorders the best ``rerank_candidates`` hits by reading each with the query."""
    rerank_candidates: int = 20
    fusion: Fusion = "scores"
    """How hybrid search fuses the vector and the text ranking (:func:`~kbsync.app.fusion.fuse`)."""
    vector_weight: float = 0.5
    """The vector ranking's weight in hybrid search, the text ranking's the rest."""

    def search(self, query: str, k: int, mode: SearchMode, context_tokens: int,
               vector: npt.NDArray[np.float32] | None = None,
               filters: Filters | None = None) -> SearchResults:
        """The best ``k`` hits, ranked; with ``context_tokens``, each grown into its window
        (see :meth:`kbsync.app.knowledge_base.KnowledgeBase.search`). Damaged vectors are never
        ranked: the results warn, once, of how many were left out."""
        if k < 1:
            raise ParameterError(f"k must be at least 1, not {k}")
        if context_tokens < 0:  # as [search] context_tokens in kbsync.toml is refused
            raise ParameterError(f"context_tokens must be 0 (the chunk alone) or more, not "
                                 f"{context_tokens}")
        if mode not in SEARCH_MODES:
            raise ParameterError(f"unknown search mode {mode!r}: use vector, text or hybrid")
        final = k
        if self.reranker is not None:
            k = max(k, self.rerank_candidates)
        if not context_tokens:
            wanted = k
            while True:  # while a document repeats a passage, rank more
                found = self.ranked(query, wanted, mode, vector, filters)
                kept = distinct(found.hits)
                if len(kept) >= k or len(found.hits) < wanted:
                    hits = self.described(ranked(self.reranked(query, kept[:k], final)))
                    return _results(hits, found.unsound)
                wanted *= 4
        results: list[Hit] = []
        taken: dict[tuple[str, str], set[int]] = {}  # chunks in the windows returned
        # Hits that fall into a window already returned are merged, and a window does not
        # grow into another (it would repeat its text): rank a few spare hits.
        found = self.ranked(query, 3 * k, mode, vector, filters)
        for hit in found.hits:
            held = taken.setdefault((hit.source, hit.key), set())
            if hit.index in held:
                continue
            window = self.store.window(hit, context_tokens, held)
            held.update(range(window.first, window.last + 1))
            results.append(replace(hit, context=window.text, context_tokens=window.tokens,
                                   first=window.first, last=window.last))
            if len(results) == k:
                break
        return _results(self.described(ranked(self.reranked(query, results, final))),
                        found.unsound)

    def reranked(self, query: str, hits: list[Hit], k: int) -> list[Hit]:
        """The best ``k`` hits, by the reranker's reading of each hit's context with the
        query when there is a reranker."""
        if self.reranker is None or not hits:
            return hits[:k]
        scores = self.reranker.score(normalize(query).text, [h.context or h.text for h in hits])
        return reranked(hits, scores, k)

    def described(self, hits: list[Hit]) -> list[Hit]:
        """The hits with their documents' metadata and time of last change."""
        facts = self.store.document_facts({(h.source, h.key) for h in hits}) if hits else {}
        out = []
        for hit in hits:
            metadata, changed = facts.get((hit.source, hit.key), (None, None))
            out.append(replace(hit, metadata=_metadata(metadata), changed=changed))
        return out

    def ranked(self, query: str, k: int, mode: SearchMode,
               vector: npt.NDArray[np.float32] | None = None,
               filters: Filters | None = None) -> Nearest:
        """The best ``k`` chunks in ``mode``, each with its relevance, before windows, and
        how many chunks the vector search left out because their vector is damaged."""
        query = normalize(query).text  # the same form as the indexed chunk texts
        if mode == "text":
            return Nearest(text_relevance(self.store.search_text(query, k, filters)))
        if vector is None:
            vector = self.query_vector(query)
        if mode == "vector":
            near = self.alike(query, vector, k, filters)
            return Nearest(vector_relevance(near.hits), near.unsound)
        pool = max(k, FUSION_DEPTH)
        near = self.alike(query, vector, pool, filters)
        return Nearest(fuse((vector_relevance(near.hits),
                             text_relevance(self.store.search_text(query, pool, filters))), k,
                            self.fusion, (self.vector_weight, 1.0 - self.vector_weight),
                            FUSION_DEPTH),
                       near.unsound)

    def alike(self, query: str, vector: npt.NDArray[np.float32], k: int,
              filters: Filters | None = None) -> Nearest:
        """The ``k`` nearest chunks that are alike in more than hash collisions: with a
        :class:`~kbsync.embed.LexicalEmbedder`, those sharing a term with ``query`` (more
        are ranked while the nearest leave some out); with any other embedder, the
        nearest.

        The ranking widens at most to ``_WIDEST`` times ``k``, and not past a chunk of no
        likeness at all: a query whose words few chunks hold would otherwise read every
        chunk that a collision puts near it."""
        if not isinstance(self.embedder, LexicalEmbedder):
            return self.nearest(vector, k, filters)
        wanted = k
        while True:
            near = self.nearest(vector, wanted, filters)
            shared = self.embedder.share_terms(query, [h.text for h in near.hits])
            # A cosine within float error of 0 is no likeness: where many chunks tie there,
            # their order is the vector store's own (NumPy's and Qdrant's differ).
            kept = [hit for hit, alike in zip(near.hits, shared, strict=True)
                    if alike and hit.score > _NO_LIKENESS]
            if (len(kept) >= k or len(near.hits) < wanted or wanted >= _WIDEST * k
                    or near.hits[-1].score <= 0):
                return Nearest(kept[:k], near.unsound)
            wanted *= 4

    def query_vector(self, query: str) -> npt.NDArray[np.float32]:
        """The embedder's vector of the normalized query (by its query encoder, if it has one)."""
        texts = [normalize(query).text]
        if isinstance(self.embedder, QueryEmbedder):
            vector: npt.NDArray[np.float32] = self.embedder.embed_query(texts)[0]
        else:
            vector = self.embedder.embed(texts)[0]
        return vector

    def nearest(self, vector: npt.NDArray[np.float32], k: int,
                filters: Filters | None = None) -> Nearest:
        """Vector hits, from the vector index (an external store's when configured),
        without the vectors that cannot be right for the embedder's norm."""
        return self.index.nearest(self.embedder.identity, vector, k, filters,
                                  norm_of(self.embedder))


_NO_LIKENESS = 1e-6
"""A lexical embedder's cosine at most this is collisions cancelling out, not likeness."""

_WIDEST = 256
"""How far past ``k`` a lexical embedder's vector ranking widens to find chunks that share
a term with the query: one ranked below 255·k collisions is no answer worth the scan."""


def _results(hits: list[Hit], unsound: int) -> SearchResults:
    return SearchResults(hits, [unsound_warning(unsound)] if unsound else [], unsound)


def distinct(hits: list[Hit]) -> list[Hit]:
    """The hits in order, without a chunk whose text the same document already gave:
    a passage repeated in a document would fill the results with copies of itself."""
    seen: set[tuple[str, str, str]] = set()
    kept = []
    for hit in hits:
        if (hit.source, hit.key, hit.text) not in seen:
            seen.add((hit.source, hit.key, hit.text))
            kept.append(hit)
    return kept


def _metadata(stored: str | None) -> dict[str, Any]:
    """A document's stored metadata as a mapping (damaged or missing: none)."""
    try:
        value = json.loads(stored) if stored else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
