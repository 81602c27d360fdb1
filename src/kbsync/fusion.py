"""Hybrid search's fusion of ranked lists of chunks into one ranking."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kbsync.store import Hit

__all__ = ["RRF_K", "fuse"]

RRF_K = 60
"""The rank offset of reciprocal rank fusion (the usual constant of Cormack et al.)."""


def fuse(lists: Sequence[Sequence[Hit]], k: int, *, document_weight: float = 0.0) -> list[Hit]:
    """The ``k`` best hits of ``lists`` (each best first) by reciprocal rank fusion.

    With ``document_weight``, a chunk's score also counts that share of its
    document's: the sum of the fused scores of all its chunks in the lists, so a
    document whose evidence is spread over several chunks is not outranked by one
    that matches in a single chunk.
    """
    chunks: dict[tuple[str, str, int], float] = {}
    documents: dict[tuple[str, str], float] = {}
    hits: dict[tuple[str, str, int], Hit] = {}
    for results in lists:
        for rank, hit in enumerate(results):
            key = (hit.source, hit.key, hit.index)
            share = 1.0 / (RRF_K + rank + 1)
            chunks[key] = chunks.get(key, 0.0) + share
            documents[key[:2]] = documents.get(key[:2], 0.0) + share
            hits.setdefault(key, hit)
    score = {key: s + document_weight * documents[key[:2]] for key, s in chunks.items()}
    best = sorted(score, key=lambda key: -score[key])[:k]
    return [replace(hits[key], score=score[key]) for key in best]
