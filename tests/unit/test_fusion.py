"""Relevance in [0, 1] and rank: how each search mode's raw scores read."""

from __future__ import annotations

import pytest

from kbsync.fusion import fuse, ranked, text_relevance, vector_relevance
from kbsync.store import Hit


def _hit(key: str, score: float) -> Hit:
    return Hit("s", key, None, None, 0, 0, 1, score, "text", "digest")


def test_first_in_both_lists_is_relevance_one_and_first_in_one_list_is_one_half() -> None:
    vector = [_hit("a", 0.9), _hit("b", 0.8)]
    text = [_hit("a", 12.0), _hit("c", 3.0)]
    fused = fuse([vector, text], 3)
    assert [h.key for h in fused] == ["a", "b", "c"]
    assert fused[0].relevance == pytest.approx(1.0)
    assert fused[1].relevance == pytest.approx(0.5 * 61 / 62)  # second in one list only
    only_vector = fuse([vector, []], 1)
    assert only_vector[0].relevance == pytest.approx(0.5)


def test_vector_relevance_is_the_cosine_clipped_to_zero_and_one() -> None:
    hits = vector_relevance([_hit("a", 1.0000002), _hit("b", 0.42), _hit("c", -0.3)])
    assert [h.relevance for h in hits] == [1.0, 0.42, 0.0]
    assert [h.score for h in hits] == [1.0000002, 0.42, -0.3]  # the raw score stays


def test_text_relevance_is_bm25_over_the_best_hit() -> None:
    hits = text_relevance([_hit("a", 8.0), _hit("b", 2.0)])
    assert [h.relevance for h in hits] == [1.0, 0.25]
    assert text_relevance([]) == []


def test_ranks_count_from_one() -> None:
    assert [h.rank for h in ranked([_hit("a", 1.0), _hit("b", 0.5)])] == [1, 2]
