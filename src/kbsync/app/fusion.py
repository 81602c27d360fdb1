"""Hybrid search's fusion of ranked lists of chunks into one ranking, and the
relevance in [0, 1] that a search reports beside each hit's raw score.

Relevance, by mode:

- vector: the cosine similarity of the query and the chunk, clipped to [0, 1]
  (a negative similarity, no likeness at all, is 0);
- text: the hit's BM25 score divided by the best one of the same search, so the
  best text hit is 1 and the others say how close to it they come (BM25 has no
  upper bound of its own, and its scale differs between stores);
- hybrid: the mean of the hit's vector and text relevance (0 in a list that does
  not hold it; weighted as the lists are), at most that of the hit ranked above it,
  so relevance falls with rank as users read it. Fused scores say where a hit
  ranks, not how well it matches: a query no chunk matches in words would read
  1.0 for the nearest vector, which says nothing of it.

Hybrid ranking, by default, fuses the lists' scores, not their ranks: each hit's score
in a list scaled between the list's 40th candidate (0, whatever ``k``) and its best (1),
so neither the cosine's nor BM25's scale weighs more, summed with the lists' weights.
Reciprocal rank fusion (``"ranks"``) throws away by how much a hit leads: a chunk
holding every word of the question and one the vector search barely placed first
counted the same. Dividing
by the best alone (no lower end) was as good on the long-document QA set but let a
flat list count alike for all its hits: BM25 gives every chunk that holds the one rare
word of a question about the same score, and a hashing embedder's loose vectors then
ranked alone.

A hit of relevance 0 (no likeness in any list: a vector at a right angle or
beyond, and no word in common) is not returned: filling ``k`` with those made
unrelated documents look like answers. Nor, with a lexical embedder (hashed words),
is a vector hit sharing no term with the query (:meth:`kbsync.app.searching.Searcher.alike`):
its likeness is hash collisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from kbsync.errors import ParameterError
from kbsync.model import FUSIONS, Fusion
from kbsync.store import Hit

__all__ = ["FUSIONS", "FUSION_DEPTH", "RRF_K", "Fusion", "fuse", "ranked", "reranked",
           "text_relevance", "vector_relevance"]

RRF_K = 60
"""The rank offset of reciprocal rank fusion (the usual constant of Cormack et al.)."""

FUSION_DEPTH = 40
"""Candidates of each list that hybrid search scales its scores between, however many
hits are asked for: the best is 1, the 40th 0, those below it 0 too. Scaled between
the last of ``max(4 k, 20)`` candidates, a hit's place moved with ``k`` (the first three
of 5 of 8 questions naming a FastAPI page's heading changed between k = 3 and k = 25).
40 is the depth the QA figures were measured at (k = 10)."""


def fuse(lists: Sequence[Sequence[Hit]], k: int, fusion: Fusion = "scores",
         weights: Sequence[float] | None = None, depth: int | None = None) -> list[Hit]:
    """The ``k`` best hits of ``lists`` (each best first, with its raw score and its
    relevance), fused by ``fusion`` with the lists' ``weights`` (equal by default).

    ``"scores"``: a hit's fused score is the weighted sum, over the lists, of its score
    scaled between the list's ``depth``-th (0; the lowest without ``depth``, and 0 for
    those below it) and best (1), 1 when they are equal (0 in a list that does not hold
    it). ``"ranks"``: reciprocal rank fusion, the weighted sum
    of 1 / (60 + rank). Each hit's ``score`` is its fused score, its ``relevance`` the
    weighted mean of its relevance in each list (0 in a list that does not hold it), at
    most that of the hit before it. With ``depth``, a hit among the first ``depth`` of
    some list counts only such places (a list holding it deeper counts as not holding
    it), so a hit ranks and reads alike at any ``k``. Ties keep the order of first
    appearance, the first list's first.

    Chunks only, not their documents: adding each document's fused score to its
    chunks' (so evidence spread over a page counts) lowered recall@5 of hybrid
    search on the long-document QA set from 94.4 to 91.4 at a tenth of the weight,
    and further with more.
    """
    if fusion not in FUSIONS:
        raise ParameterError(f"unknown fusion {fusion!r}: use scores or ranks")
    if weights is None:
        weights = [1.0] * len(lists)
    if len(weights) != len(lists) or min(weights, default=0.0) < 0 or not sum(weights) > 0:
        raise ParameterError(f"fusion weights {list(weights)} are not one non-negative weight "
                         "per list, some above 0")
    total = sum(weights)
    # [fused score, relevance] of each hit from the places among the first ``depth`` of
    # the lists, and from those below: a hit that some list holds within the depth counts
    # those places only, so how deep the lists go (how many hits were asked for) changes
    # neither where it ranks nor how relevant it reads.
    near: dict[tuple[str, str, int], list[float]] = {}
    far: dict[tuple[str, str, int], list[float]] = {}
    hits: dict[tuple[str, str, int], Hit] = {}
    for given, weight in zip(lists, weights, strict=True):
        # A hit of no likeness is no hit, nor the low end of a list's scale: a vector store
        # that returns one (a cosine of 0) must rank the rest as one that does not.
        results = [hit for hit in given if hit.relevance > 0]
        scores = sorted((hit.score for hit in results), reverse=True)
        best = scores[0] if scores else 0.0
        low = scores[min(depth or len(scores), len(scores)) - 1] if scores else 0.0
        for rank, hit in enumerate(results):
            key = (hit.source, hit.key, hit.index)
            if fusion == "ranks":
                part = 1.0 / (RRF_K + rank + 1)
            else:
                part = max(0.0, (hit.score - low) / (best - low)) if best > low else 1.0
            sums = (near if depth is None or rank < depth else far).setdefault(key, [0.0, 0.0])
            sums[0] += weight * part
            sums[1] += hit.relevance * weight / total
            hits.setdefault(key, hit)
    score, relevance = {}, {}
    for key in hits:
        score[key], relevance[key] = near[key] if key in near else far[key]
    fused: list[Hit] = []
    ceiling = 1.0
    alike = [key for key in score if relevance[key] > 0]
    for key in sorted(alike, key=lambda key: -score[key])[:k]:
        ceiling = min(ceiling, _unit(relevance[key]))
        fused.append(replace(hits[key], score=score[key], relevance=ceiling))
    return fused


def _unit(value: float) -> float:
    return min(1.0, max(0.0, value))


def vector_relevance(hits: Sequence[Hit]) -> list[Hit]:
    """Vector hits with their relevance, the cosine similarity clipped to [0, 1]; those
    of no likeness (0) left out."""
    return [replace(h, relevance=_unit(h.score)) for h in hits if h.score > 0]


def text_relevance(hits: Sequence[Hit]) -> list[Hit]:
    """Full-text hits with their relevance: the BM25 score over the best of ``hits``."""
    best = max((h.score for h in hits), default=0.0)
    return [replace(h, relevance=_unit(h.score / best) if best > 0 else 0.0) for h in hits]


def reranked(hits: Sequence[Hit], scores: Sequence[float], k: int) -> list[Hit]:
    """The ``k`` best of ``hits`` by a reranker's ``scores`` (logits), each with its score
    and, as its relevance, the score's sigmoid (a cross-encoder trained on relevant and
    irrelevant pairs gives about 0.5 where it cannot tell); ties keep the first order."""
    order = sorted(range(len(hits)), key=lambda i: -scores[i])[:k]
    return [replace(hits[i], score=scores[i], relevance=_sigmoid(scores[i])) for i in order]


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def ranked(hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` (best first) with their 1-based rank."""
    return [replace(h, rank=n) for n, h in enumerate(hits, 1)]
