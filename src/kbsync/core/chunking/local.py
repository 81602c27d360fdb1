"""The strictly local strategy: every cut decision reads a bounded neighbourhood only.

Notation: words are numbered; "position k" is the cut after word k; ``T(k)`` is
the number of tokens of words ``0..k`` (``T(-1) = 0``); every word has at least
one token and its count depends on the word alone. ``f1(k)`` and ``f2(k)`` are
two independent 64-bit mixes of the fingerprint of the ``w = window_words``
words ending at k. Let ``r = min_tokens`` and ``L = max_tokens - min_tokens``.

Rules:

* **primary** -- ``f1(k) < f1(j)`` for every other position j with
  ``|T(j) - T(k)| < r`` (a strict local minimum);
* **hard** -- word ``k`` or word ``k + 1`` alone has more than ``L`` tokens (an
  over-long word is cut on both sides);
* **final** -- the last position;
* **forced** -- call primary, hard and final positions *anchors*. For every
  position ``m - 1`` (including ``-1``) the window ``W(m) = {j >= m : T(j) - T(m-1) <= L}``
  that holds no anchor gets a cut at its ``f2``-minimum (the latest one on ties).

Size: for consecutive cuts ``c1 < c2`` where word ``c1 + 1`` has at most ``L``
tokens, ``W(c1 + 1)`` holds word ``c1 + 1``, and either an anchor or its forced
pick, so ``T(c2) - T(c1) <= L <= max_tokens``. Otherwise word ``c1 + 1`` is
over-long and is cut on both sides, a chunk of one word. Primaries are more than
``r`` tokens apart, so chunks between two primaries are never smaller than
``min_tokens``; chunks next to forced or hard cuts can be (a strictly local rule
cannot keep both a hard minimum and a hard maximum: on text periodic with a
period shorter than ``min_tokens`` the fingerprints repeat, there is no strict
minimum, and forced picks land once per period, so chunks there are one
period long).

Locality: a primary decision at k reads positions within ``r - 1`` tokens, hence
within ``r - 1`` words, each side, and each fingerprint reads ``w - 1`` more words
to the left. A forced decision at k reads the windows holding k, which start at
most ``L`` tokens before k and end at most ``L`` after, and the anchor status of
every position in them. So the decision at k is a function of words
``k - (L + r + w - 2)`` to ``k + (L + r - 1)``, i.e. within ``max_tokens + w``
words on the left and ``max_tokens`` on the right.

Acceptance bound: let two inputs share a region of words of length at least
``2 * (max_tokens + window_words)`` (snapping is not offered here, so the snap
window is 0). Every position at least ``max_tokens + window_words`` words inside
the region on both sides sees the same neighbourhood in both inputs, so it is a
cut in one exactly when it is a cut in the other, with the same kind. A chunk
whose start and end lie in that interior has all its positions there, so it is
the same chunk, with the same text and identity, in both inputs. (The region's
ends are never cuts by themselves: only the input's last position is final.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import numpy.typing as npt

from kbsync.core.chunking import compiled
from kbsync.core.chunking.fingerprint import U64, mix64
from kbsync.core.chunking.params import LocalParams
from kbsync.core.chunking.stream import WordBlock, WordBuffer
from kbsync.core.identity import ChunkIdentity
from kbsync.core.normalize import IntArray, join_words
from kbsync.model import Boundary, Chunk

__all__ = ["CutRule", "cut_positions", "local_chunks", "select_cuts", "stream_cuts"]

CodeArray = npt.NDArray[np.uint8]

_SECOND_HASH = np.uint64(0xD6E8FEB86659FD93)
_CANDIDATES_PER_WINDOW = 8.0
_RANK_BITS = 3

CutRule = Callable[[WordBuffer, bool, bool], tuple[IntArray, CodeArray]]
"""Sorted cut positions of a buffer of words, and their kinds (indices into ``KINDS``), under a
strictly local rule; the flags say whether the buffer starts with the input's first word and
ends with its last."""

KINDS = (Boundary.PRIMARY, Boundary.HARD, Boundary.FORCED, Boundary.FINAL, Boundary.TAIL)
"""The boundary kinds of the local rules, in the order of their codes (the sentences
strategy's tails last)."""

Split = Callable[[WordBuffer, IntArray, IntArray, CodeArray, int, bool], tuple[IntArray, CodeArray]]
"""More cuts inside chunks already decided: given the words, their running token sums,
the cuts of the chunks to emit and their kind codes, the first word of the first of
them and whether the words end the input, the cuts and codes with the new ones among
them. It reads only each chunk's words, its ends and the word after it, so it never
moves a decided cut."""


def local_chunks(
    blocks: Iterable[WordBlock], params: LocalParams, identity: ChunkIdentity
) -> Iterator[Chunk]:
    """Chunks of the word stream ``blocks`` under the strictly local rules."""

    def rule(words: WordBuffer, first: bool, last: bool) -> tuple[IntArray, CodeArray]:
        return select_cut_codes(words.fingerprint, words.tokens, radius=params.min_tokens,
                                span=params.span)

    return stream_cuts(blocks, rule, params.reach, identity)


def stream_cuts(
    blocks: Iterable[WordBlock], rule: CutRule, reach: int, identity: ChunkIdentity,
    split: Split | None = None,
) -> Iterator[Chunk]:
    """Chunks of ``blocks`` under ``rule`` (and ``split``), each yielded as soon as no later
    word can move it.

    ``reach`` bounds, in tokens, how far the decision at a position reads on either side
    (one word more to the right). Twice that is kept on both sides of the words still
    undecided, so a decision is only trusted where the buffer holds everything it reads:
    the chunks are those of the whole input at once, with memory bounded by one block
    and the margins.
    """
    margin = 2 * reach
    words = WordBuffer()
    start, index, first = 0, 0, True
    for block in blocks:
        words.extend(block)
        n = len(words)
        if n < 3:
            continue
        cum = np.cumsum(words.tokens)
        limit = int(cum[n - 3]) - margin
        if limit <= 0:
            continue
        chunks, start = _emit(words, cum, rule(words, first, False), start, limit, index,
                              identity, split)
        index += len(chunks)
        yield from chunks
        before = int(cum[start - 1]) if start else 0
        keep = int(np.searchsorted(cum - words.tokens, before - margin, side="right")) - 1
        if keep > 0:
            words.drop(keep)
            start -= keep
            first = False
    if len(words):
        cum = np.cumsum(words.tokens)
        yield from _emit(words, cum, rule(words, first, True), start, None, index, identity,
                         split)[0]


def _emit(
    words: WordBuffer, cum: IntArray, cuts: tuple[IntArray, CodeArray], start: int,
    limit: int | None, index: int, identity: ChunkIdentity, split: Split | None = None,
) -> tuple[list[Chunk], int]:
    """The chunks from word ``start`` up to the last cut before ``limit`` tokens (each cut
    again by ``split``), and the next start."""
    positions, kinds = cuts
    first = int(np.searchsorted(positions, start))
    last = len(positions) if limit is None else (
        first + int(np.searchsorted(cum[positions[first:]], limit)))
    if last <= first:
        return [], start
    taken, taken_kinds = positions[first:last], kinds[first:last]
    if split is not None:
        taken, taken_kinds = split(words, cum, taken, taken_kinds, start, limit is None)
    built = compiled.build_chunks(words.source, words.text_starts, words.text_ends,
                                  words.input_starts, words.input_ends, cum, taken,
                                  taken_kinds, identity, start=start, index=index)
    if built is None:
        built = _built(words, cum, taken, taken_kinds, identity, start, index)
    return built, int(taken[-1]) + 1


def _built(
    words: WordBuffer, cum: IntArray, cuts: IntArray, codes: CodeArray,
    identity: ChunkIdentity, start: int, index: int,
) -> list[Chunk]:
    """The chunks between consecutive ``cuts``, from word ``start`` (the reference path)."""
    out: list[Chunk] = []
    t0 = int(cum[start - 1]) if start else 0
    for cut, code in zip(cuts.tolist(), codes.tolist(), strict=True):
        kind = KINDS[code]
        t1 = int(cum[cut])
        text = join_words(words.source, words.text_starts, words.text_ends, start, cut + 1)
        out.append(Chunk(
            index=index + len(out),
            text=text,
            start=int(words.input_starts[start]),
            end=int(words.input_ends[cut]),
            token_count=t1 - t0,
            boundary=kind,
            identity=identity(text),
        ))
        start, t0 = cut + 1, t1
    return out


def cut_positions(
    fingerprint: U64, tokens: IntArray, min_tokens: int, max_tokens: int
) -> tuple[IntArray, list[Boundary]]:
    """Sorted cut positions and their kinds (see the module docstring for the rules)."""
    return select_cuts(fingerprint, tokens, radius=min_tokens, span=max_tokens - min_tokens)


def select_cuts(
    fingerprint: U64, tokens: IntArray, *, radius: int, span: int,
    ranks: npt.NDArray[np.uint8] | None = None, eligible_below: int = 0,
    first: bool = False, last: bool = False,
) -> tuple[IntArray, list[Boundary]]:
    """Cut positions and kinds under the local rules (see :func:`select_cut_codes`)."""
    cuts, codes = select_cut_codes(fingerprint, tokens, radius=radius, span=span, ranks=ranks,
                                   eligible_below=eligible_below, first=first, last=last)
    return cuts, [KINDS[c] for c in codes.tolist()]


def select_cut_codes(
    fingerprint: U64, tokens: IntArray, *, radius: int, span: int,
    ranks: npt.NDArray[np.uint8] | None = None, eligible_below: int = 0,
    first: bool = False, last: bool = False,
) -> tuple[IntArray, CodeArray]:
    """Cut positions and kind codes (``KINDS``) under the local rules with primary radius
    ``radius`` and forced windows of ``span`` tokens; the compiled kernel's when loaded.

    With ``ranks`` (0 to 7 per position), only positions ranked below ``eligible_below``
    can be primaries, and a lower rank beats any higher one, in primaries and in forced
    picks alike; the fingerprint only orders positions of equal rank. A rank must be a
    function of the words around its position, so the rules stay local. With ranks, the
    input's edges also count as primaries: ``first`` (the words start the input) and
    ``last`` (they end it) keep primaries ``radius`` tokens away from them, so that a
    title or a closing line is not a chunk of its own.
    """
    fused = compiled.local_cuts(fingerprint, tokens, radius, span, ranks, eligible_below, first,
                                last)
    if fused is not None:
        return fused
    n = len(tokens)
    cum = np.cumsum(tokens)
    f1 = fingerprint
    f2 = mix64(fingerprint ^ _SECOND_HASH)
    if ranks is None:
        primary = strict_local_minima(f1, cum, radius)
    else:
        allowed = ranks < eligible_below
        if first:
            allowed &= cum >= radius
        if last:
            allowed &= int(cum[-1]) - cum >= radius
        eligible = np.flatnonzero(allowed)
        primary = np.zeros(n, dtype=np.bool_)
        # The eligible positions are sparse (a sentence is ~20 words), so all of them are
        # compared directly rather than through a threshold.
        won = strict_local_minima(_ranked(ranks[eligible], f1[eligible]), cum[eligible], radius,
                                  share=1.0)
        primary[eligible[won]] = True
        f2 = _ranked(ranks, f2)
    giant = tokens > span
    hard = giant.copy()
    hard[:-1] |= giant[1:]
    hard &= ~primary
    anchors = primary | hard
    final = np.zeros(n, dtype=np.bool_)
    if not anchors[-1]:
        final[-1] = True
    anchors |= final
    forced = _forced_picks(f2, cum, np.flatnonzero(anchors), span) & ~anchors
    cut_mask = anchors | forced
    cuts = np.flatnonzero(cut_mask)
    codes: CodeArray = np.select(
        [primary[cuts], hard[cuts], forced[cuts]], [0, 1, 2], default=3
    ).astype(np.uint8)
    return cuts, codes


def _ranked(ranks: npt.NDArray[np.uint8], values: U64) -> U64:
    """Keys that order by rank first, then by the top 61 bits of ``values``."""
    shift = np.uint64(64 - _RANK_BITS)
    key: U64 = (ranks.astype(np.uint64) << shift) | (values >> np.uint64(_RANK_BITS))
    return key


def strict_local_minima(
    values: U64, cum: IntArray, radius: int, *, share: float | None = None
) -> npt.NDArray[np.bool_]:
    """Positions k whose value is strictly below every other within ``radius - 1`` tokens.

    Only positions with a value below a threshold (the lowest ``share`` of the range;
    by default about eight per radius of one-token positions) can win where such a
    position is nearby, so those are compared among themselves in array operations;
    the rare stretches with none nearby are checked exactly with a range-minimum table.
    """
    n = len(values)
    out = np.zeros(n, dtype=np.bool_)
    if n == 0:
        return out
    if share is None:
        share = min(1.0, _CANDIDATES_PER_WINDOW / radius)
    threshold = np.uint64(min(int(share * 2.0**64), (1 << 64) - 1))
    cand = np.flatnonzero(values < threshold) if share < 1.0 else np.arange(n)
    fc, tc = values[cand], cum[cand]
    alive = np.ones(len(cand), dtype=np.bool_)
    d = 1
    while d < len(cand):
        near = (tc[d:] - tc[:-d]) < radius
        if not near.any():
            break
        later_le = near & (fc[d:] <= fc[:-d])  # the later one beats (or ties) the earlier
        earlier_le = near & (fc[:-d] <= fc[d:])
        alive[:-d] &= ~later_le
        alive[d:] &= ~earlier_le
        d += 1
    out[cand[alive]] = True
    # Stretches where some position has no candidate within the radius.
    bounds_t = np.concatenate([[-(2 * radius) - 1], tc, [int(cum[-1]) + 2 * radius + 1]])
    bounds_i = np.concatenate([[-1], cand, [n]])
    wide = np.flatnonzero(np.diff(bounds_t) > 2 * radius - 1)
    for g in wide.tolist():
        lo, hi = int(bounds_i[g]) + 1, int(bounds_i[g + 1])
        if hi > lo:
            _exact_minima(values, cum, radius, lo, hi, out)
    return out


def _exact_minima(
    values: U64, cum: IntArray, radius: int, lo: int, hi: int, out: npt.NDArray[np.bool_]
) -> None:
    """Mark strict minima among positions ``lo..hi-1`` that have no candidate in range."""
    n = len(values)
    # The neighbourhood of a position in the stretch reaches at most `radius` tokens out.
    left = int(np.searchsorted(cum, int(cum[lo]) - radius, side="right"))
    right = int(np.searchsorted(cum, int(cum[hi - 1]) + radius, side="left"))
    a, z = max(0, left), min(n, right)
    seg = values[a:z]
    table = _ArgminTable(seg)
    ks = np.arange(lo, hi)
    wlo = np.searchsorted(cum, cum[ks] - radius, side="right") - a
    whi = np.searchsorted(cum, cum[ks] + radius, side="left") - 1 - a
    wlo = np.maximum(wlo, 0)
    whi = np.minimum(whi, z - a - 1)
    local = ks - a
    best = table.query(wlo, whi)
    is_min = best == local
    before = local > wlo
    if before.any():
        idx = np.flatnonzero(before)
        prior = table.query(wlo[idx], local[idx] - 1)
        is_min[idx] &= seg[prior] > seg[local[idx]]
    out[ks[is_min]] = True


class _ArgminTable:
    """Sparse table answering "latest position of the minimum in [lo, hi]" in O(1) per query."""

    def __init__(self, values: U64) -> None:
        self.values = values
        level = np.arange(len(values))
        self.levels = [level]
        width = 1
        while 2 * width <= len(values):
            a, b = level[:-width], level[width:]
            level = np.where(values[a] < values[b], a, b)
            self.levels.append(level)
            width *= 2

    def query(self, lo: IntArray, hi: IntArray) -> IntArray:
        size = hi - lo + 1
        k = np.floor(np.log2(np.maximum(size, 1))).astype(np.int64)
        out = np.empty(len(lo), dtype=np.int64)
        for level in np.unique(k).tolist():
            sel = np.flatnonzero(k == level)
            table = self.levels[level]
            a = table[lo[sel]]
            b = table[hi[sel] - (1 << level) + 1]
            out[sel] = np.where(self.values[a] < self.values[b], a, b)
        return out


def _forced_picks(f2: U64, cum: IntArray, anchors: IntArray, span: int) -> npt.NDArray[np.bool_]:
    """Winnowing picks of the anchor-free windows of ``span`` tokens."""
    n = len(f2)
    picks = np.zeros(n, dtype=np.bool_)
    if span <= 0 or n == 0:
        return picks
    prev = np.concatenate([[-1], anchors[:-1]])
    t_prev = np.where(prev >= 0, cum[np.maximum(prev, 0)], 0)
    wide = np.flatnonzero(cum[anchors] - t_prev > span)
    for g in wide.tolist():
        a_prev, a = int(prev[g]), int(anchors[g])
        t_anchor = int(cum[a])
        # Window starts m in (a_prev, a]; its base is T(m - 1). Keep windows that miss `a`.
        ms = np.arange(a_prev + 1, a)
        base = np.where(ms > 0, cum[np.maximum(ms - 1, 0)], 0)
        ms = ms[t_anchor - base > span]
        if len(ms) == 0:
            continue
        base = np.where(ms > 0, cum[np.maximum(ms - 1, 0)], 0)
        ends = np.searchsorted(cum, base + span, side="right") - 1
        keep = ends >= ms
        ms, ends = ms[keep], ends[keep]
        if len(ms) == 0:
            continue
        lo_i, hi_i = int(ms[0]), int(ends.max()) + 1
        table = _ArgminTable(f2[lo_i:hi_i])
        picks[table.query(ms - lo_i, ends - lo_i) + lo_i] = True
    return picks
