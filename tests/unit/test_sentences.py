"""The sentence-aware strategy: its rules, its streaming, its locality bound, its shape on prose."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbsync import Boundary, ParameterError, chunk_text, normalize
from kbsync.core.chunking import EstimatingCounter, LocalParams, SentenceParams
from kbsync.core.chunking.fingerprint import mix64
from kbsync.core.chunking.local import _SECOND_HASH, local_chunks, select_cuts
from kbsync.core.chunking.sentences import WORD, sentence_chunks
from kbsync.core.chunking.stream import WordBlock, word_blocks
from kbsync.core.identity import ChunkIdentity
from tests.regions import interior_chunks

PARAMS = {"min_tokens": 6, "max_tokens": 24, "window_words": 3}
MARGIN = PARAMS["max_tokens"] + PARAMS["min_tokens"] + PARAMS["window_words"] + 1  # words
TAIL = {**PARAMS, "tail_above": 10}
# A tail cut reads the chunk around it, whose ends lie up to max_tokens words away.
TAIL_MARGIN = MARGIN + PARAMS["max_tokens"]
IDENTITY = ChunkIdentity(1, "sentences-v1", "test")


def _words(rng: random.Random, n: int) -> list[str]:
    """Words with sentence ends, paragraph breaks and the odd heading among them."""
    out = []
    for _ in range(n):
        word = "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 6)))
        roll = rng.random()
        if roll < 0.12:
            word += rng.choice([".", "!", "?", ".)", '."'])
        elif roll < 0.16:
            word += ".\n\n"
        elif roll < 0.17:
            word += "\n\n## "
        out.append(word)
    return out


def _text(words: list[str]) -> str:
    return " ".join(words)


def _interior_chunks(text: str, first: int, last: int,
                     params: dict[str, int] = PARAMS) -> set[tuple[int, str]]:
    return interior_chunks(text, "sentences", params, first, last)


@pytest.mark.parametrize(("params", "margin"), [(PARAMS, MARGIN), (TAIL, TAIL_MARGIN)],
                         ids=["plain", "tails"])
@given(st.integers(min_value=0, max_value=2**32), st.integers(2, 6))
def test_chunks_inside_a_shared_region_are_identical_whatever_surrounds_it(
    params: dict[str, int], margin: int, seed: int, times: int
) -> None:
    rng = random.Random(seed)
    shared = _words(rng, times * margin)
    seen = []
    for _ in "xy":
        before, after = _words(rng, rng.randint(0, 80)), _words(rng, rng.randint(0, 80))
        # The region is a run of whole words: the text before it ends in a plain space.
        before = [w.rstrip(".!?)\"\n#") or "w" for w in before]
        words = before + shared + after
        lo = len(normalize(_text(before)).word_starts) + margin
        hi = lo - margin + len(normalize(_text(shared)).word_starts) - margin
        seen.append(_interior_chunks(_text(words), lo, hi, params))
    assert seen[0] == seen[1]


def _tails_cut_naively(text: str, params: dict[str, int]) -> list[str]:
    """The chunks without tails, each long one that ends a paragraph cut before its tail
    as :class:`SentenceParams` says, word by word."""
    settings = SentenceParams(**params)
    plain = chunk_text(text, strategy="sentences",
                       **{**params, "tail_above": 0}).chunks  # type: ignore[arg-type]
    canonical = normalize(text).text
    out, at = [], 0
    for c in plain:
        at = canonical.index(c.text, at)
        after = at + len(c.text)
        at = after
        ends_paragraph = after == len(canonical) or canonical.startswith("\n\n", after)
        words = [w for block in word_blocks([c.text], EstimatingCounter(), 3,
                                            with_sentences=True) for w in _block_words(block)]
        total = sum(t for _, t, _, _ in words)
        cut = None
        if total > settings.tail_above and ends_paragraph:
            run = 0
            for k, (_, t, sentence, paragraph_next) in enumerate(words[:-1]):
                run += t
                if (sentence or paragraph_next) and total - run >= settings.tail_min:
                    cut = (k, run)
        if cut is not None and total - cut[1] <= settings.tail_max \
                and cut[1] >= settings.min_tokens:
            end = words[cut[0]][0]
            out += [c.text[:end], c.text[end:].lstrip()]
        else:
            out.append(c.text)
    return out


def _block_words(block: WordBlock) -> list[tuple[int, int, bool, bool]]:
    """(end offset, tokens, sentence end after it, paragraph mark after it) of each word."""
    n = len(block.tokens)
    return [(int(block.input_ends[k]), int(block.tokens[k]), bool(block.sentence_end[k]),
             k + 1 < n and bool(block.paragraph[k + 1])) for k in range(n)]


@given(st.integers(min_value=0, max_value=2**32), st.sampled_from([6, 10, 16]))
def test_a_long_chunk_that_ends_a_paragraph_is_cut_before_its_tail(seed: int,
                                                                   above: int) -> None:
    text = _text(_words(random.Random(seed), 400))
    params = {**PARAMS, "tail_above": above}
    chunks = chunk_text(text, strategy="sentences", **params).chunks  # type: ignore[arg-type]
    assert [c.text for c in chunks] == _tails_cut_naively(text, params)


def test_tails_make_short_closing_sentences_chunks_of_their_own(prose: str) -> None:
    plain = chunk_text(prose, strategy="sentences").chunks
    tails = chunk_text(prose, strategy="sentences", tail_above=100).chunks
    cut = [c for c in tails if c.boundary is Boundary.TAIL]
    assert len(tails) == len(plain) + len(cut)
    assert len(cut) > len(plain) // 20
    after = {tails[i + 1].token_count for i, c in enumerate(tails) if c.boundary is Boundary.TAIL}
    assert max(after) <= SentenceParams(tail_above=100).tail_max


def test_the_locality_bound_is_not_vacuous(prose: str) -> None:
    rng = random.Random(3)
    shared = " ".join(prose.split(" ")[:3000])
    n = len(normalize(shared).word_starts)
    inner = []
    for before, after in ((_text([*_words(rng, 57), "x"]), ""), ("y", "end")):
        first = len(normalize(before).word_starts)
        text = f"{before} {shared} {after}"
        inner.append(_interior_chunks(text, first + MARGIN, first + n - MARGIN))
    assert len(inner[0]) > 100
    assert inner[0] == inner[1]


def _naive_cuts(f: list[int], f2: list[int], tok: list[int], rank: list[int], mn: int,
                mx: int) -> list[int]:
    """The rules of kbsync.core.chunking.sentences, position by position."""
    n = len(f)
    t = list(itertools.accumulate(tok))

    def key(k: int, v: list[int]) -> tuple[int, int]:
        return rank[k], v[k] >> 3

    primary = [rank[k] < WORD and all(key(k, f) < key(j, f) for j in range(n)
                                      if j != k and rank[j] < WORD and abs(t[j] - t[k]) < mn)
               for k in range(n)]
    giant = [x > mx for x in tok]
    hard = [(giant[k] or (k + 1 < n and giant[k + 1])) and not primary[k] for k in range(n)]
    anchor = [p or h for p, h in zip(primary, hard, strict=True)]
    anchor[-1] = True
    cuts = {k for k in range(n) if anchor[k]}
    for m in range(n):
        base = t[m - 1] if m else 0
        window = [j for j in range(m, n) if t[j] - base <= mx]
        if window and not any(anchor[j] for j in window):
            cuts.add(min(window, key=lambda j: (key(j, f2), -j)))
    return sorted(cuts)


@given(
    st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(1, 9), st.integers(0, 4)),
             min_size=1, max_size=120),
    st.integers(1, 12),
    st.integers(1, 30),
    st.booleans(),
)
def test_cuts_follow_the_rules_exactly(
    rows: list[tuple[int, int, int]], mn: int, extra: int, small_values: bool
) -> None:
    values = [v % 7 if small_values else v for v, _, _ in rows]  # small values force ties
    tok = np.array([t for _, t, _ in rows], dtype=np.int64)
    rank = [r for _, _, r in rows]
    fp = np.array(values, dtype=np.uint64)
    cuts, kinds = select_cuts(fp, tok, radius=mn, span=mn + extra,
                              ranks=np.array(rank, dtype=np.uint8), eligible_below=WORD)
    f2 = mix64(fp ^ _SECOND_HASH).tolist()
    assert cuts.tolist() == _naive_cuts(values, f2, tok.tolist(), rank, mn, mn + extra)
    assert len(kinds) == len(cuts)


@pytest.mark.parametrize("strategy", ["sentences", "sentences with tails", "local"])
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=8, max_value=400))
def test_streaming_in_blocks_of_any_size_gives_the_one_shot_chunks(
    strategy: str, seed: int, block_chars: int
) -> None:
    text = _text(_words(random.Random(seed), 600))

    def run(size: int) -> list[object]:
        blocks = word_blocks([text], EstimatingCounter(), 3, with_sentences=True,
                             block_chars=size)
        if strategy.startswith("sentences"):
            params = TAIL if "tails" in strategy else PARAMS
            return list(sentence_chunks(blocks, SentenceParams(**params), IDENTITY))
        return list(local_chunks(blocks, LocalParams(**PARAMS), IDENTITY))

    assert run(block_chars) == run(1 << 20)


def test_chunks_of_prose_end_at_sentence_or_paragraph_ends(prose: str) -> None:
    chunks = chunk_text(prose, strategy="sentences").chunks
    ends = [c for c in chunks[:-1] if c.text.rstrip("\"')]”’» ")[-1] in ".!?"]
    assert len(ends) >= 0.97 * (len(chunks) - 1)


def test_chunks_never_exceed_the_maximum_and_primaries_keep_the_minimum(corpus: str) -> None:
    chunks = chunk_text(corpus, strategy="sentences").chunks
    for prev, c in itertools.pairwise(chunks):
        assert c.token_count <= 192 or len(c.text.split()) == 1
        if prev.boundary is Boundary.PRIMARY and c.boundary is Boundary.PRIMARY:
            assert c.token_count >= 48


def test_a_sentence_longer_than_the_maximum_is_cut_at_a_word() -> None:
    text = " ".join(f"w{i}" for i in range(400)) + "."
    chunks = chunk_text(text, strategy="sentences", min_tokens=10, max_tokens=50).chunks
    assert len(chunks) >= 400 * 2 // 50
    assert all(c.token_count <= 50 for c in chunks)
    assert {c.boundary for c in chunks[:-1]} == {Boundary.FORCED}


def test_a_cut_falls_before_a_heading_rather_than_after_it() -> None:
    body = "Some words here make one sentence. " * 6
    text = f"{body}\n\n## Installing\n\n{body}\n\n## Running\n\n{body}"
    chunks = chunk_text(text, strategy="sentences", min_tokens=20, max_tokens=80).chunks
    assert [c.text.startswith("## ") for c in chunks].count(True) == 2
    assert not any(c.text.endswith(("Installing", "Running")) for c in chunks)


def test_the_strategy_has_its_own_identity_version() -> None:
    text = "One sentence here. Another one there.\n\nA paragraph."
    a = chunk_text(text, strategy="sentences").chunks[0].identity
    b = chunk_text(text, strategy="local").chunks[0].identity
    assert a != b
    assert chunk_text(text, strategy="sentences").diagnostics.chunker_id == "sentences-v1"


@pytest.mark.parametrize(("params", "message"), [
    ({"min_tokens": 100, "max_tokens": 100}, "max_tokens > min_tokens"),
    ({"min_tokens": 0}, "min_tokens must be a positive integer"),
    ({"tail_above": -5}, "tail_above must be a positive integer"),
])
def test_bad_parameters_are_clear_errors(params: dict[str, int], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        SentenceParams(**params)
