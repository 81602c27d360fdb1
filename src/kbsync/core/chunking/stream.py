"""From pieces of text to blocks of word arrays: hashes, fingerprints, token counts, offsets.

Input arrives as any sequence of string pieces. Pieces are regrouped into blocks
that end just before the start of a word, so that no word and no whitespace run
is ever split between blocks; each block is scanned and hashed with array
operations, and the rolling state (the last ``window - 1`` word hashes, the
trailing whitespace, the character offset) is carried to the next block. A
block's arrays therefore do not depend on where the pieces were split.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kbsync.core.chunking import compiled
from kbsync.core.chunking.fingerprint import U64, window_fingerprints, word_hashes
from kbsync.core.chunking.tokens import TokenCounter
from kbsync.core.normalize import BLOCK_CHARS, IntArray, WordScan, iter_blocks, scan_words

__all__ = ["BLOCK_CHARS", "WordBlock", "WordBuffer", "iter_blocks", "word_blocks"]

_SENTENCE_END = np.zeros(256, dtype=np.bool_)
for _c in b".!?":
    _SENTENCE_END[_c] = True
_CLOSER = np.zeros(256, dtype=np.bool_)
for _c in b"\"')]":
    _CLOSER[_c] = True


@dataclass(frozen=True, slots=True, eq=False)
class WordBlock:
    """The words of one block with everything the chunkers need.

    ``fingerprint[i]`` is the mixed window fingerprint of the words up to and
    including word ``i``; ``input_*`` are character offsets into the whole input;
    ``text_*`` index ``source``; ``sentence_end[i]`` says word ``i`` ends a sentence.
    """

    source: str
    text_starts: IntArray
    text_ends: IntArray
    input_starts: IntArray
    input_ends: IntArray
    paragraph: npt.NDArray[np.bool_]
    sentence_end: npt.NDArray[np.bool_]
    tokens: IntArray
    fingerprint: U64

    def __len__(self) -> int:
        return len(self.tokens)


def word_blocks(
    pieces: Iterable[str], counter: TokenCounter, window_words: int,
    *, with_sentences: bool = False, block_chars: int = BLOCK_CHARS,
) -> Iterator[WordBlock]:
    """Scan, hash and count the words of ``pieces``, block by block."""
    history = np.zeros(window_words - 1, dtype=np.uint64)
    leading = ""
    base = 0
    for text in iter_blocks(pieces, block_chars):
        fused = compiled.scan_block(text, leading, history, window_words, base, with_sentences,
                                    counter)
        if fused is not None:  # the same block from the compiled kernel, in one pass
            block, history, leading = fused
            yield block
            base += len(text)
            continue
        scan = scan_words(text, leading)
        leading = scan.trailing_space
        n = len(scan)
        if n:
            hashes = word_hashes(scan.data, scan.byte_starts, scan.byte_ends)
            fingerprint = window_fingerprints(history, hashes, window_words)
            if window_words > 1:
                history = np.concatenate([history, hashes])[-(window_words - 1):]
            yield WordBlock(
                source=scan.source,
                text_starts=scan.text_starts,
                text_ends=scan.text_ends,
                input_starts=scan.input_starts + base,
                input_ends=scan.input_ends + base,
                paragraph=scan.paragraph,
                sentence_end=_sentence_ends(scan) if with_sentences else _NO_FLAGS[:0],
                tokens=counter.count(scan),
                fingerprint=fingerprint,
            )
        base += len(text)


_NO_FLAGS = np.zeros(0, dtype=np.bool_)
_NO_INTS: IntArray = np.zeros(0, dtype=np.int64)
_NO_HASHES: U64 = np.zeros(0, dtype=np.uint64)


def _sentence_ends(scan: WordScan) -> npt.NDArray[np.bool_]:
    """Words ending in ``.``, ``!`` or ``?``, maybe followed by one closing quote or bracket."""
    b = scan.data
    ends = scan.byte_ends
    length = ends - scan.byte_starts
    last = b[ends - 1]
    flags = _SENTENCE_END[last]
    before = b[np.maximum(ends - 2, 0)]
    flags |= _CLOSER[last] & (length >= 2) & _SENTENCE_END[before]
    # ” and ’ are three bytes in UTF-8: E2 80 9D / E2 80 99.
    curly = ((last == 0x9D) | (last == 0x99)) & (length >= 4)
    if curly.any():
        idx = np.flatnonzero(curly)
        e = ends[idx]
        ok = (b[e - 2] == 0x80) & (b[e - 3] == 0xE2) & _SENTENCE_END[b[e - 4]]
        flags[idx[ok]] = True
    return flags


@dataclass(slots=True, eq=False)
class WordBuffer:
    """The words of consecutive blocks, joined, that a streaming chunker has not let go of.

    ``source`` is the canonical text of the words in the buffer, which ``text_*`` index;
    the other arrays are those of :class:`WordBlock`, concatenated.
    """

    source: str = ""
    text_starts: IntArray = field(default_factory=lambda: _NO_INTS)
    text_ends: IntArray = field(default_factory=lambda: _NO_INTS)
    input_starts: IntArray = field(default_factory=lambda: _NO_INTS)
    input_ends: IntArray = field(default_factory=lambda: _NO_INTS)
    paragraph: npt.NDArray[np.bool_] = field(default_factory=lambda: _NO_FLAGS)
    sentence_end: npt.NDArray[np.bool_] = field(default_factory=lambda: _NO_FLAGS)
    tokens: IntArray = field(default_factory=lambda: _NO_INTS)
    fingerprint: U64 = field(default_factory=lambda: _NO_HASHES)

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, block: WordBlock) -> None:
        """Append the words of ``block``, glued to the words before as canonical text is."""
        glue = ("\n\n" if block.paragraph[0] else " ") if len(self) else ""
        shift = len(self.source) + len(glue)
        self.source = self.source + glue + block.source if glue else block.source
        self.text_starts = np.concatenate([self.text_starts, block.text_starts + shift])
        self.text_ends = np.concatenate([self.text_ends, block.text_ends + shift])
        self.input_starts = np.concatenate([self.input_starts, block.input_starts])
        self.input_ends = np.concatenate([self.input_ends, block.input_ends])
        self.paragraph = np.concatenate([self.paragraph, block.paragraph])
        self.sentence_end = np.concatenate([self.sentence_end, block.sentence_end])
        self.tokens = np.concatenate([self.tokens, block.tokens])
        self.fingerprint = np.concatenate([self.fingerprint, block.fingerprint])

    def drop(self, count: int) -> None:
        """Forget the first ``count`` words."""
        count = min(count, len(self))
        if count <= 0:
            return
        cut = int(self.text_starts[count]) if count < len(self) else len(self.source)
        self.source = self.source[cut:]
        self.text_starts = self.text_starts[count:] - cut
        self.text_ends = self.text_ends[count:] - cut
        self.input_starts = self.input_starts[count:]
        self.input_ends = self.input_ends[count:]
        self.paragraph = self.paragraph[count:]
        self.sentence_end = self.sentence_end[count:]
        self.tokens = self.tokens[count:]
        self.fingerprint = self.fingerprint[count:]
