from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbsync import (
    Boundary,
    Chunk,
    ParameterError,
    TTTDParams,
    chunk_stream,
    chunk_text,
    normalize,
)
from kbsync.core.chunking.stream import word_blocks
from kbsync.core.chunking.tokens import EstimatingCounter
from kbsync.core.chunking.tttd import tttd_chunks
from kbsync.core.identity import ChunkIdentity
from tests import reference
from tests.conftest import corpus_text

_CORPUS_HEAD = corpus_text("b-*.md")[:6000]

SMALL = {"min_tokens": 12, "max_tokens": 48, "primary_bits": 4, "backup_bits": 2, "window_words": 4}
VOCAB = ["alpha", "beta", "gamma", "delta,", "epsilon.", "zeta", "eta!", "theta", "x1", "naïve"]
WORDS = st.lists(st.sampled_from([*VOCAB, "\n\n", "\n", "  "]), max_size=300)


def _text(tokens: list[str]) -> str:
    return " ".join(tokens)


def test_the_vectorized_chunker_cuts_exactly_where_the_plain_reference_does(prose: str) -> None:
    for params in (SMALL, {}):
        got = [(c.text, str(c.boundary), c.token_count) for c in chunk_text(prose, **params)]
        assert got == reference.tttd(prose, TTTDParams(**params))


@given(WORDS)
def test_random_text_is_cut_like_the_reference(tokens: list[str]) -> None:
    text = _text(tokens)
    got = [(c.text, str(c.boundary), c.token_count) for c in chunk_text(text, **SMALL)]
    assert got == reference.tttd(text, TTTDParams(**SMALL))


@given(WORDS, st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=20))
def test_streaming_in_any_pieces_gives_the_one_shot_chunks(
    tokens: list[str], sizes: list[int]
) -> None:
    text = _text(tokens)
    pieces, pos, k = [], 0, 0
    while pos < len(text):
        step = sizes[k % len(sizes)]
        pieces.append(text[pos : pos + step])
        pos, k = pos + step, k + 1
    assert list(chunk_stream(pieces, **SMALL)) == list(chunk_text(text, **SMALL).chunks)


@given(st.integers(min_value=8, max_value=3000))
def test_any_block_size_gives_the_same_chunks(block_chars: int) -> None:
    # Small limits make block ends coincide with the maximum often (a past off-by-one).
    params = TTTDParams(min_tokens=6, max_tokens=12, primary_bits=6, backup_bits=5, window_words=3)
    text = _CORPUS_HEAD
    identity = ChunkIdentity(1, "tttd-v1", "test")

    def run(size: int) -> list[Chunk]:
        blocks = word_blocks([text], EstimatingCounter(), 3, block_chars=size)
        return list(tttd_chunks(blocks, params, identity))

    assert run(block_chars) == run(1 << 20)


def test_streaming_a_long_text_in_tiny_pieces_matches_the_one_shot_call(corpus: str) -> None:
    pieces = [corpus[i : i + 997] for i in range(0, len(corpus), 997)]
    assert list(chunk_stream(pieces)) == list(chunk_text(corpus).chunks)


def test_chunks_respect_min_and_max_tokens(corpus: str) -> None:
    result = chunk_text(corpus)
    for c in result.chunks[:-1]:
        assert c.token_count <= 512 or len(c.text.split()) == 1
        assert c.token_count >= 128 or c.boundary is Boundary.HARD
    assert result.chunks[-1].boundary is Boundary.FINAL


def test_offsets_point_at_the_chunk_in_the_input(corpus: str) -> None:
    for c in chunk_text(corpus).chunks:
        assert normalize(corpus[c.start : c.end]).text == c.text


def test_chunks_cover_the_whole_normalized_text(corpus: str) -> None:
    result = chunk_text(corpus)
    assert " ".join(c.text for c in result.chunks).split() == normalize(corpus).words


def test_an_inserted_sentence_changes_only_the_chunks_near_it(prose: str) -> None:
    before = {c.identity for c in chunk_text(prose).chunks}
    rng = random.Random(7)
    news = []
    for _ in range(20):
        at = prose.index(". ", rng.randrange(len(prose) - 100)) + 2
        edited = prose[:at] + "A lighthouse keeper wrote this sentence down. " + prose[at:]
        news.append(sum(c.identity not in before for c in chunk_text(edited).chunks))
    assert max(news) <= 3
    assert sum(news) / len(news) <= 2.0


def test_identities_change_with_the_parameters_but_not_with_the_offsets() -> None:
    a = chunk_text("one two three four five " * 50, **SMALL).chunks
    b = chunk_text("zero " + "one two three four five " * 50, **SMALL).chunks
    c = chunk_text("one two three four five " * 50, **{**SMALL, "max_tokens": 49}).chunks
    assert {x.identity for x in a} & {x.identity for x in b}
    assert not {x.identity for x in a} & {x.identity for x in c}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"window_words": 0}, "window_words"),
        ({"min_tokens": 0}, "min_tokens"),
        ({"min_tokens": 600, "max_tokens": 500}, "greater than max_tokens"),
        ({"primary_bits": 65, "backup_bits": 5}, "wider than the 64-bit"),
        ({"primary_bits": 5, "backup_bits": 5}, "backup_bits"),
        ({"snap": True, "snap_window_words": 0}, "snap_window_words"),
        ({"max_token": 5}, "unknown parameter"),
    ],
)
def test_bad_parameters_are_clear_errors(params: dict[str, int], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        chunk_text("some text", **params)


def test_empty_and_blank_text_give_no_chunks() -> None:
    assert chunk_text("").chunks == ()
    assert chunk_text(" \n\n\t ").chunks == ()


def test_a_word_longer_than_the_maximum_is_a_chunk_of_its_own() -> None:
    text = "small words here " + "x" * 5000 + " and more small words"
    result = chunk_text(text, min_tokens=2, max_tokens=20, primary_bits=30, backup_bits=29)
    assert any(c.text == "x" * 5000 and c.boundary is Boundary.HARD for c in result.chunks)


def test_snapping_is_off_by_default_and_moves_cuts_to_sentence_ends(prose: str) -> None:
    plain = chunk_text(prose)
    assert not plain.diagnostics.snapping
    snapped = chunk_text(prose, snap=True)
    assert snapped.diagnostics.snapping
    assert snapped.diagnostics.snapped_cuts > 0
    ends = [c.text.rstrip("”’\"')]")[-1] for c in snapped.chunks[:-1]]
    plain_ends = [c.text.rstrip("”’\"')]")[-1] for c in plain.chunks[:-1]]
    assert sum(e in ".!?" for e in ends) > 2 * sum(e in ".!?" for e in plain_ends)
    for c in snapped.chunks[:-1]:
        assert 128 <= c.token_count <= 512


def test_snapping_prefers_a_paragraph_break_over_a_nearer_sentence_end() -> None:
    words = [f"w{chr(97 + i % 26)}" for i in range(40)]  # one token each
    words[15] = "end."  # a sentence end 3 words before the raw hard cut after word 18
    text = " ".join(words[:12]) + "\n\n" + " ".join(words[12:])  # a paragraph 7 words before
    params = {"min_tokens": 5, "max_tokens": 20, "primary_bits": 60, "backup_bits": 59,
              "window_words": 2}
    raw = chunk_text(text, **params).chunks[0]
    assert raw.boundary is Boundary.HARD
    assert raw.text.split()[-1] == words[18]
    snapped = chunk_text(text, snap=True, snap_window_words=8, **params).chunks[0]
    assert snapped.snapped
    assert snapped.text.split()[-1] == words[11]
    no_paragraph = chunk_text(text.replace("\n\n", " "), snap=True, snap_window_words=8, **params)
    assert no_paragraph.chunks[0].text.endswith("end.")


def test_diagnostics_count_every_boundary_kind(corpus: str) -> None:
    d = chunk_text(corpus).diagnostics
    assert d.chunk_count == d.primary_cuts + d.backup_cuts + d.hard_cuts + d.final_cuts
    assert d.tokens_min <= d.tokens_p50 <= d.tokens_p95 <= d.tokens_max
    assert 0.0 <= d.hard_cut_rate < 0.05
    assert d.chunker_id == "tttd-v1"
    assert d.token_counter == "estimate-v1"


def test_a_tail_of_exactly_the_maximum_is_one_final_chunk() -> None:
    params = {"min_tokens": 20, "max_tokens": 60, "primary_bits": 30, "backup_bits": 1}
    chunks = chunk_text(" ".join(["ab"] * 60), **params).chunks
    assert [(c.token_count, c.boundary) for c in chunks] == [(60, Boundary.FINAL)]
    assert reference.tttd(" ".join(["ab"] * 60), TTTDParams(**params))[0][1] == "final"
