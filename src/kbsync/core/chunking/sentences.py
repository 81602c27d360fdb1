"""Sentence-aware strictly local chunking: chunks end at paragraph and sentence ends.

Retrieval works best on chunks that are whole sentences and, where they fit, whole
paragraphs; TTTD and the plain local strategy cut at arbitrary words. This strategy
keeps the strictly local rules of :mod:`kbsync.core.chunking.local` but decides *where*
a cut may fall by what ends there. Every position (the cut after word k) has a rank:

0. a paragraph end followed by a Markdown heading (the next word is one to six ``#``);
1. a paragraph end after a sentence end (see 3);
2. any other paragraph end (after a title, a list item, a line of code);
3. a sentence end: the word ends in ``.``, ``!`` or ``?``, maybe followed by one
   closing quote or bracket;
4. any other word.

So a title stays with the text it introduces: the paragraph end before it (after
a sentence) outranks the one after it.

With the notation of :mod:`kbsync.core.chunking.local`, ``r = min_tokens`` and
``L = max_tokens``, and keys ordered by rank first, then by a fingerprint:

* **primary** -- a position of rank 0 to 3 whose key ``(rank, f1)`` is strictly below
  that of every other such position within ``r - 1`` tokens, and which is at least
  ``r`` tokens from the start and from the end of the input: so a paragraph end beats
  every sentence end near it, of several sentence ends the fingerprint picks one, and
  a title or a closing line stays with the text next to it;
* **hard** -- word k or word k + 1 alone has more than ``L`` tokens;
* **final** -- the last position;
* **forced** -- every window of ``L`` tokens that holds no anchor gets a cut at the
  minimum of ``(rank, f2)`` in it: a paragraph end if it has one, else a sentence end,
  else a word (inside a sentence longer than the window).

* **tail** (with ``tail_above``, off by default) -- a chunk between two cuts above
  that ends a paragraph (or the input) and holds more than ``tail_above`` tokens is
  cut once more, after the last sentence or paragraph end inside it that leaves at
  least ``tail_min`` tokens after it, when those are at most ``tail_max`` and at least
  ``min_tokens`` come before it. The last sentences of a long paragraph then make a
  chunk of their own, which matches a question about them closely: on the
  long-document QA set, vector recall@5 with context windows rose from 92.4 to 94.8
  (``benchmarks/retrieval``).

Size: no chunk exceeds ``max_tokens`` (a single longer word aside), and a chunk
between two primaries has at least ``min_tokens`` (the part of one before its tail
too; the tail itself has at least ``tail_min``).

Locality: a rank reads word k and word k + 1; a primary decision reads positions
within ``r - 1`` tokens each side; a forced decision reads the windows holding k and
the anchor status of their positions, within ``L + r`` tokens; a fingerprint reads
``window_words - 1`` words to the left. Every word has at least one token, so the
decision at k is a function of words ``k - (L + r + w)`` to ``k + (L + r + 1)``. Two
inputs that share a region of words therefore cut identically at every position at
least ``max_tokens + min_tokens + window_words + 1`` words inside it, and every
chunk that starts and ends there is the same chunk in both, text and identity. A tail
cut reads the chunk around it, whose ends lie at most ``max_tokens`` words away, and
the word after it: with tails the bound grows by ``max_tokens`` words. Tails are cut
in the chunks a stream is about to emit, whose ends no later word can move, so
streaming gives the chunks of the whole input at once as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from kbsync.core.chunking.local import KINDS, CodeArray, Split, select_cut_codes, stream_cuts
from kbsync.core.chunking.params import SentenceParams
from kbsync.core.chunking.stream import WordBlock, WordBuffer
from kbsync.core.identity import ChunkIdentity
from kbsync.core.normalize import IntArray
from kbsync.model import Boundary, Chunk

__all__ = [
    "BARE_PARAGRAPH_END", "HEADING_BREAK", "PARAGRAPH_END", "SENTENCE_END", "WORD", "ranks",
    "sentence_chunks", "tail_split",
]

HEADING_BREAK, PARAGRAPH_END, BARE_PARAGRAPH_END, SENTENCE_END, WORD = 0, 1, 2, 3, 4

_TAIL = KINDS.index(Boundary.TAIL)


def sentence_chunks(
    blocks: Iterable[WordBlock], params: SentenceParams, identity: ChunkIdentity
) -> Iterator[Chunk]:
    """Chunks of the word stream ``blocks`` (scanned with sentence ends) under the rules above."""

    def rule(words: WordBuffer, first: bool, last: bool) -> tuple[IntArray, CodeArray]:
        return select_cut_codes(words.fingerprint, words.tokens, radius=params.min_tokens,
                                span=params.span, ranks=ranks(words), eligible_below=WORD,
                                first=first, last=last)

    split = tail_split(params) if params.tail_above else None
    return stream_cuts(blocks, rule, params.reach, identity, split)


def tail_split(params: SentenceParams) -> Split:
    """The cuts before the tails of long chunks that end a paragraph (see the module
    docstring), among the cuts of the chunks about to be emitted."""

    def split(words: WordBuffer, cum: IntArray, cuts: IntArray, codes: CodeArray, start: int,
              ended: bool) -> tuple[IntArray, CodeArray]:
        out_cuts: list[int] = []
        out_codes: list[int] = []
        prev = start - 1
        for cut, code in zip(cuts.tolist(), codes.tolist(), strict=True):
            tail = _tail_cut(words, cum, prev, cut, ended, params)
            if tail is not None:
                out_cuts.append(tail)
                out_codes.append(_TAIL)
            out_cuts.append(cut)
            out_codes.append(code)
            prev = cut
        return np.asarray(out_cuts, dtype=np.int64), np.asarray(out_codes, dtype=np.uint8)

    return split


def _tail_cut(words: WordBuffer, cum: IntArray, prev: int, cut: int, ended: bool,
              params: SentenceParams) -> int | None:
    """Where the chunk of words ``prev + 1`` to ``cut`` is cut before its tail, if it is."""
    before = int(cum[prev]) if prev >= 0 else 0
    end = int(cum[cut])
    if end - before <= params.tail_above:
        return None
    if not (words.paragraph[cut + 1] if cut + 1 < len(words) else ended):
        return None  # the chunk does not end a paragraph
    inside = slice(prev + 1, cut)
    ends = words.sentence_end[inside] | words.paragraph[prev + 2 : cut + 1]
    found = np.flatnonzero(ends & (end - cum[inside] >= params.tail_min))
    if not len(found):
        return None
    k = prev + 1 + int(found[-1])  # the fewest sentences
    if end - int(cum[k]) > params.tail_max or int(cum[k]) - before < params.min_tokens:
        return None
    return k


def ranks(words: WordBuffer) -> npt.NDArray[np.uint8]:
    """The rank of the position after each word of ``words`` (see the module docstring)."""
    n = len(words)
    out = np.full(n, WORD, dtype=np.uint8)
    out[words.sentence_end] = SENTENCE_END
    # A paragraph mark before word k + 1 ends a paragraph at position k.
    breaks = np.flatnonzero(words.paragraph[1:])
    out[breaks] = np.where(words.sentence_end[breaks], PARAGRAPH_END, BARE_PARAGRAPH_END)
    if len(breaks):
        out[breaks[_headings(words, breaks + 1)]] = HEADING_BREAK
    return out


def _headings(words: WordBuffer, starts: IntArray) -> npt.NDArray[np.bool_]:
    """Which of the words at ``starts`` open a Markdown heading (one to six ``#``)."""
    src = words.source
    a, b = words.text_starts[starts], words.text_ends[starts]
    out = np.zeros(len(starts), dtype=np.bool_)
    # Only words of one to six characters can be one; the rest are not read.
    short = np.flatnonzero(b - a <= 6)
    out[short] = np.fromiter(
        (_is_heading_mark(src[x:y]) for x, y in zip(a[short].tolist(), b[short].tolist(),
                                                     strict=True)),
        dtype=np.bool_, count=len(short),
    )
    return out


def _is_heading_mark(word: str) -> bool:
    return 1 <= len(word) <= 6 and word == "#" * len(word)
