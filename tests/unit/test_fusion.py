"""Relevance in [0, 1] and rank: how each search mode's raw scores read."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbsync.app.fusion import fuse, ranked, text_relevance, vector_relevance
from kbsync.store import Hit


def _hit(key: str, score: float) -> Hit:
    return Hit("s", key, None, None, 0, 0, 1, score, "text", "digest")


def test_hybrid_relevance_is_the_mean_of_each_lists_relevance() -> None:
    vector = vector_relevance([_hit("a", 0.9), _hit("b", 0.8)])
    text = text_relevance([_hit("a", 12.0), _hit("c", 3.0)])
    fused = fuse([vector, text], 3)
    assert [h.key for h in fused] == ["a", "b", "c"]  # the order is reciprocal rank fusion's
    assert [h.relevance for h in fused] == pytest.approx([(0.9 + 1.0) / 2, 0.8 / 2, 0.25 / 2])


def test_hybrid_relevance_never_rises_down_the_ranking() -> None:
    vector = vector_relevance([_hit("a", 0.1), _hit("b", 0.9)])
    text = text_relevance([_hit("a", 1.0), _hit("b", 0.5)])
    fused = fuse([vector, text], 2)
    assert [h.key for h in fused] == ["a", "b"]
    assert [h.relevance for h in fused] == pytest.approx([0.55, 0.55])  # b's 0.7, capped


def test_a_query_no_text_matches_reads_low_in_hybrid_however_it_ranks() -> None:
    """The nearest vector of a query of unknown words ranks first, but matches nothing."""
    fused = fuse([vector_relevance([_hit("a", 0.04)]), text_relevance([])], 1)
    assert fused[0].relevance == pytest.approx(0.02)


def test_vector_relevance_is_the_cosine_clipped_to_one_and_no_likeness_is_no_hit() -> None:
    hits = vector_relevance([_hit("a", 1.0000002), _hit("b", 0.42), _hit("c", 0.0),
                             _hit("d", -0.3)])
    assert [h.relevance for h in hits] == [1.0, 0.42]
    assert [h.score for h in hits] == [1.0000002, 0.42]  # the raw score stays


def test_hybrid_leaves_out_hits_alike_in_neither_list() -> None:
    vector = [replace(_hit("a", 0.5), relevance=0.5), replace(_hit("z", 0.0), relevance=0.0)]
    text = [replace(_hit("b", 3.0), relevance=1.0)]
    fused = fuse([vector, text], k=5)
    assert sorted(h.key for h in fused) == ["a", "b"]


def test_text_relevance_is_bm25_over_the_best_hit() -> None:
    hits = text_relevance([_hit("a", 8.0), _hit("b", 2.0)])
    assert [h.relevance for h in hits] == [1.0, 0.25]
    assert text_relevance([]) == []


def test_ranks_count_from_one() -> None:
    assert [h.rank for h in ranked([_hit("a", 1.0), _hit("b", 0.5)])] == [1, 2]
