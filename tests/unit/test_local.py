from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbsync import Boundary, LocalParams, ParameterError, chunk_text
from kbsync.core.chunking.fingerprint import mix64
from kbsync.core.chunking.local import _SECOND_HASH, cut_positions
from tests.regions import interior_chunks

PARAMS = {"min_tokens": 6, "max_tokens": 30, "window_words": 3}
MARGIN = PARAMS["max_tokens"] + PARAMS["window_words"]  # words; snapping is not offered


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 6))) for _ in range(n)]


def _interior_chunks(text: str, first: int, last: int) -> set[tuple[int, str]]:
    return interior_chunks(text, "local", PARAMS, first, last)


@given(st.integers(min_value=0, max_value=2**32), st.integers(2 * MARGIN, 6 * MARGIN))
def test_chunks_inside_a_shared_region_are_identical_whatever_surrounds_it(
    seed: int, shared_len: int
) -> None:
    rng = random.Random(seed)
    shared = _words(rng, shared_len)
    contexts = [(_words(rng, rng.randint(0, 80)), _words(rng, rng.randint(0, 80))) for _ in "xy"]
    seen = []
    for before, after in contexts:
        text = " ".join(before + shared + after)
        lo = len(before) + MARGIN
        hi = len(before) + shared_len - MARGIN
        seen.append({(a - MARGIN, t) for a, t in _interior_chunks(text, lo, hi)})
    assert seen[0] == seen[1]


def test_the_bound_is_not_vacuous(prose: str) -> None:
    rng = random.Random(3)
    shared = prose.split()[:2000]
    texts = [" ".join(_words(rng, 57) + shared), " ".join(_words(rng, 13) + shared + ["end"])]
    inner = [_interior_chunks(t, n + MARGIN, n + len(shared) - MARGIN) for t, n in
             zip(texts, (57, 13), strict=True)]
    assert len(inner[0]) > 50
    assert {t for _, t in inner[0]} == {t for _, t in inner[1]}


def _naive_cuts(f: list[int], f2: list[int], tok: list[int], mn: int, mx: int) -> list[int]:
    n = len(f)
    t = list(np.cumsum(tok))
    span = mx - mn
    primary = [all(f[k] < f[j] for j in range(n) if j != k and abs(t[j] - t[k]) < mn)
               for k in range(n)]
    giant = [x > span for x in tok]
    hard = [(giant[k] or (k + 1 < n and giant[k + 1])) and not primary[k] for k in range(n)]
    anchor = [p or h for p, h in zip(primary, hard, strict=True)]
    anchor[-1] = True
    cuts = {k for k in range(n) if anchor[k]}
    for m in range(n):
        base = t[m - 1] if m else 0
        window = [j for j in range(m, n) if t[j] - base <= span]
        if window and not any(anchor[j] for j in window):
            cuts.add(min(window, key=lambda j: (f2[j], -j)))
    return sorted(cuts)


@given(
    st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(1, 9)), min_size=1, max_size=120),
    st.integers(1, 12),
    st.integers(1, 30),
    st.booleans(),
)
def test_cut_positions_follow_the_rules_exactly(
    rows: list[tuple[int, int]], mn: int, extra: int, small_values: bool
) -> None:
    values = [v % 7 if small_values else v for v, _ in rows]  # small values force ties
    tok = np.array([t for _, t in rows], dtype=np.int64)
    fp = np.array(values, dtype=np.uint64)
    cuts, kinds = cut_positions(fp, tok, mn, mn + extra)
    f2 = mix64(fp ^ _SECOND_HASH).tolist()
    assert cuts.tolist() == _naive_cuts(values, f2, tok.tolist(), mn, mn + extra)
    assert len(kinds) == len(cuts)


def test_chunks_never_exceed_the_maximum_and_primaries_keep_the_minimum(corpus: str) -> None:
    result = chunk_text(corpus, strategy="local")
    chunks = result.chunks
    for prev, c in itertools.pairwise(chunks):
        assert c.token_count <= 512 - 128 or len(c.text.split()) == 1
        if prev.boundary is Boundary.PRIMARY and c.boundary is Boundary.PRIMARY:
            assert c.token_count >= 128
    d = result.diagnostics
    assert d.forced_cuts < d.primary_cuts / 3


def test_periodic_text_shorter_than_the_minimum_gets_one_chunk_per_period() -> None:
    text = "the same five words here " * 400  # a period of 5 tokens, far below min_tokens
    chunks = chunk_text(text, strategy="local", min_tokens=20, max_tokens=60).chunks
    assert all(c.boundary in (Boundary.FORCED, Boundary.FINAL) for c in chunks)
    assert {c.token_count for c in chunks[1:-1]} == {5}


def test_local_parameters_are_validated() -> None:
    with pytest.raises(ParameterError, match="max_tokens > min_tokens"):
        LocalParams(min_tokens=100, max_tokens=100)
