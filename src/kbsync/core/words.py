"""The words of a scanned text as arrays, and what makes a whitespace run a paragraph mark.

Shared by the normalizer (:mod:`kbsync.core.normalize`) and the compiled kernel's
scans (:mod:`kbsync.core.kernel_scans`), which make the same :class:`WordScan`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["BoolArray", "ByteArray", "IntArray", "WordScan", "is_paragraph_break"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
ByteArray = npt.NDArray[np.uint8]


# Paragraph separators (form feed, \x1c-\x1e, U+2029): one of them makes a paragraph mark.
_PARAGRAPH_CHARS = "\x0c\x1c\x1d\x1e\u2029"


@dataclass(frozen=True, slots=True, eq=False)
class WordScan:
    """The words of one piece of text, as arrays; the chunker's input.

    ``source`` is the canonical text of the words, which the ``text_*`` offsets
    index (so the canonical text of words ``i..j`` is one slice); ``data`` and
    the ``byte_*`` offsets are the UTF-8 bytes the word hashes are computed over;
    ``input_*`` are character offsets into the scanned input. ``paragraph[i]`` is
    true when a paragraph mark precedes word ``i`` (for word 0: when the whitespace
    before it, ``leading_space`` included, is paragraph-sized); ``trailing_space`` is
    the whitespace after the last word, for the scan of the text that follows.
    """

    source: str
    data: ByteArray
    byte_starts: IntArray
    byte_ends: IntArray
    text_starts: IntArray
    text_ends: IntArray
    input_starts: IntArray
    input_ends: IntArray
    paragraph: BoolArray
    trailing_space: str

    def __len__(self) -> int:
        return len(self.byte_starts)


def is_paragraph_break(space: str) -> bool:
    """Whether a whitespace run is a paragraph mark: two line breaks or a separator."""
    lines = (
        space.count("\n")
        + space.count("\r")
        - space.count("\r\n")
        + space.count("\x0b")
        + space.count("\x85")
        + space.count("\u2028")
    )
    return lines >= 2 or any(c in space for c in _PARAGRAPH_CHARS)
