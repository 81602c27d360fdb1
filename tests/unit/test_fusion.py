"""Relevance in [0, 1] and rank: how each search mode's raw scores read."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbsync.app.fusion import RRF_K, fuse, ranked, text_relevance, vector_relevance
from kbsync.errors import ParameterError
from kbsync.store import Hit


def _hit(key: str, score: float) -> Hit:
    return Hit("s", key, None, None, 0, 0, 1, score, "text", "digest")


def test_hybrid_relevance_is_the_mean_of_each_lists_relevance() -> None:
    vector = vector_relevance([_hit("a", 0.9), _hit("b", 0.8)])
    text = text_relevance([_hit("a", 12.0), _hit("c", 3.0)])
    fused = fuse([vector, text], 3)
    assert [h.key for h in fused] == ["a", "b", "c"]  # a leads both lists
    assert [h.relevance for h in fused] == pytest.approx([(0.9 + 1.0) / 2, 0.8 / 2, 0.25 / 2])


def test_hybrid_relevance_never_rises_down_the_ranking() -> None:
    vector = vector_relevance([_hit("a", 0.1), _hit("b", 0.9)])
    text = text_relevance([_hit("a", 1.0), _hit("b", 0.5)])
    fused = fuse([vector, text], 2, "ranks")  # a's ranks, b's scores
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


def _lists(scale: float = 1.0) -> tuple[list[Hit], list[Hit]]:
    """b is the nearest vector by a hair and barely matches in words; a holds the words."""
    vector = vector_relevance([_hit("b", 0.61), _hit("a", 0.60), _hit("d", 0.2)])
    text = text_relevance([_hit("c", 10.0 * scale), _hit("a", 9.5 * scale),
                           _hit("b", 1.0 * scale), _hit("e", 0.5 * scale)])
    return vector, text


def test_scores_fusion_ranks_a_hit_by_how_far_it_leads_not_by_its_place() -> None:
    vector, text = _lists()
    assert [h.key for h in fuse([vector, text], 3, "ranks")] == ["b", "a", "c"]
    fused = fuse([vector, text], 3)
    assert [h.key for h in fused] == ["a", "b", "c"]
    # each list's score scaled between its lowest and its best, summed with equal weights
    assert fused[0].score == pytest.approx((0.60 - 0.2) / (0.61 - 0.2) + 9.0 / 9.5)


def test_scores_fusion_tells_apart_the_hits_of_a_flat_list() -> None:
    """BM25 scores all chunks holding a question's one rare word about alike: the text
    list must still order them, not hand the choice to the vectors alone."""
    vector = vector_relevance([_hit("x", 0.40), _hit("a", 0.36), _hit("b", 0.20)])
    text = text_relevance([_hit("a", 4.73), _hit("x", 4.46), _hit("b", 4.45)])
    assert fuse([vector, text], 3)[0].key == "a"


def test_scores_fusion_does_not_depend_on_either_lists_scale() -> None:
    """BM25 (SQLite) and ts_rank (PostgreSQL) differ in scale by orders of magnitude."""
    orders = {tuple(h.key for h in fuse(_lists(scale), 3)) for scale in (0.001, 1.0, 1000.0)}
    shifted = [replace(h, score=h.score + 50.0) for h in _lists()[1]]
    orders.add(tuple(h.key for h in fuse([_lists()[0], shifted], 3)))
    assert orders == {("a", "b", "c")}


def test_the_weights_move_the_ranking_toward_a_list() -> None:
    vector, text = _lists()
    assert [h.key for h in fuse([vector, text], 3, weights=(1.0, 0.0))][:2] == ["b", "a"]
    assert [h.key for h in fuse([vector, text], 3, weights=(0.0, 1.0))] == ["c", "a", "b"]
    ranks = fuse([vector, text], 3, "ranks", weights=(2.0, 1.0))
    assert ranks[0].score == pytest.approx(2.0 / (RRF_K + 1) + 1.0 / (RRF_K + 3))


def test_relevance_is_the_mean_of_each_lists_relevance_weighted_as_the_lists() -> None:
    vector = vector_relevance([_hit("a", 0.8)])
    text = text_relevance([_hit("a", 4.0)])
    assert fuse([vector, text], 1, weights=(3.0, 1.0))[0].relevance == pytest.approx(
        0.75 * 0.8 + 0.25 * 1.0)


@pytest.mark.parametrize(("fusion", "weights", "message"), [
    ("votes", None, "unknown fusion 'votes'"),
    ("scores", (1.0,), "not one non-negative weight per list"),
    ("scores", (-1.0, 2.0), "not one non-negative weight per list"),
    ("ranks", (0.0, 0.0), "not one non-negative weight per list"),
])
def test_an_unknown_fusion_or_wrong_weights_are_refused(
        fusion: str, weights: tuple[float, ...] | None, message: str) -> None:
    vector, text = _lists()
    with pytest.raises(ParameterError, match=message):
        fuse([vector, text], 3, fusion, weights)  # type: ignore[arg-type]


def test_scores_are_scaled_down_to_the_depth_th_candidate_and_none_below_count() -> None:
    vector = vector_relevance([_hit(k, s) for k, s in (("a", 0.9), ("b", 0.7), ("c", 0.5),
                                                         ("d", 0.1))])
    fused = fuse([vector, text_relevance([])], 4, depth=3)
    assert [h.score for h in fused] == pytest.approx([1.0, 0.5, 0.0, 0.0])


def test_a_hit_reads_alike_whether_the_lists_go_to_the_depth_or_deeper() -> None:
    """A threshold on relevance keeps the same hits at any ``k``: "a" is the vector
    search's best and the text search's 50th, below the depth of 40."""
    vector = vector_relevance([_hit(f"v{n}", 0.9 - n / 100) for n in range(60)])
    vector = [replace(vector[0], key="a"), *vector[1:]]
    text = text_relevance([_hit(f"t{n}", 60.0 - n) for n in range(60)])
    text = [*text[:50], replace(text[50], key="a"), *text[51:]]
    shallow = fuse([vector[:40], text[:40]], 5, depth=40)
    deep = fuse([vector, text], 60, depth=40)
    assert [(h.key, h.relevance, h.score) for h in shallow] == \
        [(h.key, h.relevance, h.score) for h in deep[:5]]
