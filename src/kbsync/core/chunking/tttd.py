"""Rabin TTTD over the word stream, streaming, with optional bounded snapping.

Candidates are a pure function of the content: word ``k`` is a primary candidate
when the low ``primary_bits`` of its mixed window fingerprint are zero, a backup
candidate when the low ``backup_bits`` are. Selection, chunk by chunk from the
previous cut at cumulative token count ``t0``:

1. nothing ends before ``t0 + min_tokens``;
2. cut at the first primary candidate whose count is within ``[t0 + min, t0 + max]``;
3. otherwise, if the input ends within ``t0 + max``, the rest is the final chunk;
4. otherwise cut at the latest backup candidate within the range;
5. otherwise hard-cut at the last word that fits ``max_tokens`` (a single word longer
   than that becomes a chunk of its own).

Every step is a bisection over candidate positions; the only Python loop is one
iteration per chunk. A cut is emitted as soon as no later input can change it,
so memory stays bounded by one block plus one chunk, and the chunks are the same
however the input was split into pieces.

Snapping (off by default) moves each non-final cut to the nearest paragraph
break, else the nearest sentence end, within ``snap_window_words`` words of it;
paragraph beats sentence, nearest wins, ties go later, and a candidate is only
taken if the chunk stays within ``[min_tokens, max_tokens]``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

import numpy as np

from kbsync.core.chunking.params import TTTDParams
from kbsync.core.chunking.stream import WordBlock, WordBuffer
from kbsync.core.identity import ChunkIdentity
from kbsync.core.normalize import IntArray, join_words
from kbsync.model import Boundary, Chunk

__all__ = ["tttd_chunks"]


def tttd_chunks(
    blocks: Iterable[WordBlock], params: TTTDParams, identity: ChunkIdentity
) -> Iterator[Chunk]:
    """Chunks of the word stream ``blocks``, each emitted as soon as it is final."""
    pending = WordBuffer()
    index = 0
    for block in blocks:
        pending.extend(block)
        for chunk in _cut(pending, params, identity, index, ended=False):
            index += 1
            yield chunk
    yield from _cut(pending, params, identity, index, ended=True)


def _cut(
    p: WordBuffer, params: TTTDParams, identity: ChunkIdentity, index: int, *, ended: bool
) -> Iterator[Chunk]:
    m = len(p.tokens)
    if m == 0:
        return
    mn, mx = params.min_tokens, params.max_tokens
    cum = np.cumsum(p.tokens)
    total = int(cum[-1])
    primary = np.flatnonzero((p.fingerprint & np.uint64((1 << params.primary_bits) - 1)) == 0)
    backup = np.flatnonzero((p.fingerprint & np.uint64((1 << params.backup_bits) - 1)) == 0)
    prim_pos, prim_t = primary.tolist(), cum[primary].tolist()
    back_pos, back_t = backup.tolist(), cum[backup].tolist()
    snapper = _Snapper(p, cum, params.snap_window_words) if params.snap else None

    s, t0 = 0, 0
    while s < m:
        lo, hi = t0 + mn, t0 + mx
        i = bisect_left(prim_t, lo)
        if i < len(prim_t) and prim_t[i] <= hi:
            cut, kind = prim_pos[i], Boundary.PRIMARY
        elif not ended and total <= hi:
            break  # a primary or the end of the input may still come within the maximum
        elif ended and total <= hi:
            cut, kind = m - 1, Boundary.FINAL
        else:
            j = bisect_right(back_t, hi) - 1
            if j >= 0 and back_t[j] >= lo:
                cut, kind = back_pos[j], Boundary.BACKUP
            else:
                cut, kind = max(s, int(np.searchsorted(cum, hi, side="right")) - 1), Boundary.HARD
        snapped = False
        if snapper is not None and kind is not Boundary.FINAL:
            if not ended and cut + params.snap_window_words + 1 >= m:
                break
            target = snapper.snap(cut, s, t0 + mn, t0 + mx)
            snapped = target != cut
            cut = target
        t1 = int(cum[cut])
        text = join_words(p.source, p.text_starts, p.text_ends, s, cut + 1)
        yield Chunk(
            index=index,
            text=text,
            start=int(p.input_starts[s]),
            end=int(p.input_ends[cut]),
            token_count=t1 - t0,
            boundary=kind,
            identity=identity(text),
            snapped=snapped,
        )
        index += 1
        s, t0 = cut + 1, t1
    p.drop(s)


class _Snapper:
    """Finds the break to snap a raw cut to; reads only ±window words around it."""

    def __init__(self, p: WordBuffer, cum: IntArray, window: int) -> None:
        self._cum = cum
        self._window = window
        self._last = len(p.tokens) - 1
        # A paragraph break after word q is a mark on word q + 1.
        self._paragraphs: list[int] = (np.flatnonzero(p.paragraph[1:])).tolist()
        self._sentences: list[int] = np.flatnonzero(p.sentence_end).tolist()

    def snap(self, cut: int, start: int, lo: int, hi: int) -> int:
        first = max(start, cut - self._window)
        last = min(self._last - 1, cut + self._window)
        for breaks in (self._paragraphs, self._sentences):
            best = -1
            a, b = bisect_left(breaks, first), bisect_right(breaks, last)
            for q in breaks[a:b]:
                if not lo <= int(self._cum[q]) <= hi:
                    continue
                if best < 0 or abs(q - cut) <= abs(best - cut):
                    best = q
            if best >= 0:
                return best
        return cut
