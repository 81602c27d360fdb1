"""The versioned text normalizer: the one definition of "the content" of a document.

The document text hash, the dedup hash and the chunker all read text through
this module, so they never disagree about what changed. Normalization is:

* Unicode NFC, applied word by word (NFC never composes across whitespace);
* NUL characters and surrogate code points removed;
* line endings unified (``\\r\\n``, ``\\r``, ``\\x0b``, U+0085 and U+2028 are line breaks);
* whitespace as :meth:`str.isspace` defines it separates words, and every run of it
  collapses to one space, or to a paragraph mark ``"\\n\\n"`` when the run holds two
  or more line breaks or a paragraph separator (form feed, ``\\x1c``-``\\x1e``, U+2029);
* leading and trailing whitespace dropped.

The canonical text is therefore ``words`` joined by ``" "`` or ``"\\n\\n"``, and
normalizing it again changes nothing. Every word keeps its character offsets in
the original input.

The scanner is vectorized over the UTF-8 bytes: word boundaries, paragraph marks
and offsets come from NumPy array operations; only text that holds NUL,
surrogates or non-NFC sequences takes a per-word path. The compiled kernel does the
same scan in C where it is built (:mod:`kbsync.core.kernel_scans`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from kbsync.core import native
from kbsync.core.kernel_scans import (
    CanonicalWords,
    Words,
    canonical_words,
    compiled_words,
    scan_compiled,
)
from kbsync.core.words import BoolArray, ByteArray, IntArray, WordScan, is_paragraph_break

__all__ = [
    "BLOCK_CHARS",
    "NORMALIZER_VERSION",
    "BoolArray",
    "ByteArray",
    "CanonicalWords",
    "IntArray",
    "NormalizedText",
    "WordScan",
    "Words",
    "canonical_pieces",
    "canonical_text",
    "canonical_words",
    "compiled_words",
    "is_clean",
    "is_paragraph_break",
    "iter_blocks",
    "join_words",
    "normalize",
    "scan_words",
]

NORMALIZER_VERSION = 1

BLOCK_CHARS = 1 << 17
"""Target block size: large enough to amortize array overhead, small enough to stay in cache."""

_MAX_WORD_PROBE = 1 << 20

# Byte classes of the ASCII whitespace after the 1:1 translation below.
_NOT_SPACE, _SPACE, _LINE, _CR, _PARAGRAPH = 0, 1, 2, 3, 4
_CLASS = np.zeros(256, dtype=np.uint8)
for _c in b"\t \x1f":
    _CLASS[_c] = _SPACE
for _c in b"\n\x0b":
    _CLASS[_c] = _LINE
_CLASS[ord("\r")] = _CR
for _c in b"\x0c\x1c\x1d\x1e":
    _CLASS[_c] = _PARAGRAPH

# Non-ASCII whitespace mapped one character to one character, so offsets survive.
_UNICODE_SPACE = re.compile("[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_TRANSLATION = {
    **dict.fromkeys(map(ord, "\xa0\u1680\u202f\u205f\u3000"), " "),
    **dict.fromkeys(range(8192, 8203), " "),
    # "\x0b" rather than "\n": "\r" then U+2028 are two line breaks, not one CRLF.
    0x85: "\x0b",
    0x2028: "\x0b",
    0x2029: "\x1d",
}
_WORD = re.compile(r"\S+")
_DIRT = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
@dataclass(frozen=True, slots=True, eq=False)
class NormalizedText:
    """Canonical text plus, for every word, its character offsets in the original input."""

    text: str
    word_starts: IntArray
    word_ends: IntArray
    paragraph_before: BoolArray

    @property
    def words(self) -> list[str]:
        return self.text.split()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NormalizedText):
            return NotImplemented
        return (
            self.text == other.text
            and np.array_equal(self.word_starts, other.word_starts)
            and np.array_equal(self.word_ends, other.word_ends)
            and np.array_equal(self.paragraph_before, other.paragraph_before)
        )

    __hash__ = None  # type: ignore[assignment]


def normalize(text: str, block_chars: int = BLOCK_CHARS) -> NormalizedText:
    """Normalize ``text`` (see the module docstring); idempotent on its own output.

    A text longer than ``block_chars`` is scanned a block at a time and the
    results joined: one scan of a whole big document would hold some fifteen
    bytes of intermediate arrays per character at once.
    """
    if len(text) <= block_chars:
        words = compiled_words(text, "")
        if words is not None:
            return NormalizedText(words.source, words.input_starts, words.input_ends,
                                  _first_word_plain(words.paragraph))
        whole = scan_words(text)
        return NormalizedText(
            text=canonical_text(whole, 0, len(whole)),
            word_starts=whole.input_starts,
            word_ends=whole.input_ends,
            paragraph_before=_first_word_plain(whole.paragraph),
        )
    pieces: list[str] = []
    starts: list[IntArray] = []
    ends: list[IntArray] = []
    marks: list[BoolArray] = []
    leading = ""
    base = 0
    for block in iter_blocks([text], block_chars):
        scan: WordScan | Words = compiled_words(block, leading) or scan_words(block, leading)
        leading = scan.trailing_space
        if len(scan.input_starts):
            if pieces:
                pieces.append("\n\n" if bool(scan.paragraph[0]) else " ")
            pieces.append(scan.source)
            starts.append(scan.input_starts + base)
            ends.append(scan.input_ends + base)
            marks.append(scan.paragraph)
        base += len(block)
    if not pieces:
        return normalize(text, len(text))
    return NormalizedText(
        text="".join(pieces),
        word_starts=np.concatenate(starts),
        word_ends=np.concatenate(ends),
        paragraph_before=_first_word_plain(np.concatenate(marks)),
    )


def canonical_pieces(pieces: Iterable[str], block_chars: int = BLOCK_CHARS) -> Iterator[str]:
    """The canonical text of the concatenation of ``pieces``, handed over a block at a time.

    ``"".join(canonical_pieces([t])) == normalize(t).text``, but the word arrays of
    only one block are alive at once: a whole-text scan holds some fifteen bytes of
    arrays per character, which a big document cannot afford just to be hashed.
    """
    leading = ""
    started = False
    for block in iter_blocks(pieces, block_chars):
        scan = scan_words(block, leading)
        leading = scan.trailing_space
        if len(scan):
            if started:
                yield "\n\n" if bool(scan.paragraph[0]) else " "
            started = True
            yield scan.source


def iter_blocks(pieces: Iterable[str], block_chars: int = BLOCK_CHARS) -> Iterator[str]:
    """Regroup ``pieces`` into blocks that each end right before the start of a word.

    Memory is bounded by ``block_chars`` plus the longest word (and the largest piece).
    """
    parts: list[str] = []
    held = 0
    for piece in pieces:
        if not piece:
            continue
        parts.append(piece)
        held += len(piece)
        if held < block_chars:
            continue
        text = "".join(parts) if len(parts) > 1 else parts[0]
        pos = 0
        while len(text) - pos >= block_chars:
            cut = _last_word_start(text, pos + block_chars, pos)
            if cut <= pos:
                break
            yield text[pos:cut]
            pos = cut
        rest = text[pos:]
        parts, held = [rest], len(rest)
    if held:
        yield "".join(parts)


def _last_word_start(text: str, near: int, floor: int) -> int:
    """The last index in ``(floor, near]`` where a word starts after whitespace, else ``floor``."""
    j = min(near, len(text) - 1)
    stop = max(floor, j - _MAX_WORD_PROBE)
    while j > stop:
        if text[j - 1].isspace() and not text[j].isspace():
            return j
        j -= 1
    return floor


def scan_words(text: str, leading_space: str = "") -> WordScan:
    """Split ``text`` into normalized words with offsets, vectorized where the text allows.

    ``leading_space`` is the whitespace that preceded ``text`` in a longer input
    (the previous piece's ``trailing_space``), so that a paragraph mark split
    across two pieces is still seen.
    """
    if _needs_cleaning(text):
        return _scan_dirty(text, leading_space)
    return _scan_clean(text, leading_space)


def canonical_text(scan: WordScan, i: int, j: int) -> str:
    """Canonical text of words ``i`` to ``j - 1`` of ``scan``."""
    return join_words(scan.source, scan.text_starts, scan.text_ends, i, j)


def join_words(source: str, starts: IntArray, ends: IntArray, i: int, j: int) -> str:
    """Canonical text of words ``i`` to ``j - 1`` of a canonical ``source``: one slice."""
    if j <= i:
        return ""
    return source[int(starts[i]) : int(ends[j - 1])]


def _first_word_plain(paragraph: BoolArray) -> BoolArray:
    if len(paragraph) and paragraph[0]:
        paragraph = paragraph.copy()
        paragraph[0] = False
    return paragraph


def _needs_cleaning(text: str) -> bool:
    if "\x00" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # surrogate code points
        return True
    return not unicodedata.is_normalized("NFC", text)


def is_clean(text: str) -> bool:
    """Whether ``text`` is NFC and holds no NUL or surrogate (the scanners' fast path)."""
    return not _needs_cleaning(text)


def _scan_clean(text: str, leading_space: str = "") -> WordScan:
    """Vectorized scan of text that is NFC and holds no NUL or surrogate."""
    if native.kernel is not None:
        compiled = scan_compiled(text, leading_space)
        if compiled is not None:
            return compiled
    ascii_only = text.isascii()
    if ascii_only:
        data = text.encode("ascii")
    else:
        clean = text.translate(_TRANSLATION) if _UNICODE_SPACE.search(text) else text
        data = clean.encode("utf-8")
    b = np.frombuffer(data, dtype=np.uint8)
    n = len(b)
    cls = _CLASS[b]
    space = cls != _NOT_SPACE
    if n == 0 or bool(space.all()):
        return _empty_scan(text, b, trailing=leading_space + text)

    change = np.flatnonzero(space[1:] != space[:-1]) + 1
    bounds = np.empty(len(change) + 2, dtype=np.int64)
    bounds[0] = 0
    bounds[1:-1] = change
    bounds[-1] = n
    w0 = 1 if space[0] else 0
    byte_starts = bounds[w0:-1:2]
    byte_ends = bounds[w0 + 1 :: 2]

    # Every line break lies in the gap before exactly one word (or after the last).
    breaks, separators = _line_breaks(b, cls, data)
    n_words = len(byte_starts)
    per_gap = np.bincount(np.searchsorted(byte_starts, breaks), minlength=n_words + 1)
    paragraph = per_gap[:n_words] >= 2
    if len(separators):
        paragraph |= np.bincount(
            np.searchsorted(byte_starts, separators), minlength=n_words + 1
        )[:n_words] > 0

    if ascii_only:
        char_starts, char_ends = byte_starts, byte_ends
    else:
        char_at = np.zeros(n + 1, dtype=np.int64)
        np.cumsum((b & 0xC0) != 0x80, out=char_at[1:])
        char_starts, char_ends = char_at[byte_starts], char_at[byte_ends]
    if leading_space:
        paragraph[0] = is_paragraph_break(leading_space + text[: int(char_starts[0])])
    canonical, canon_starts, canon_ends = _canonical(
        text, b, space, byte_starts, byte_ends, char_starts, char_ends, paragraph
    )
    return WordScan(
        source=canonical,
        data=b,
        byte_starts=byte_starts,
        byte_ends=byte_ends,
        text_starts=canon_starts,
        text_ends=canon_ends,
        input_starts=char_starts,
        input_ends=char_ends,
        paragraph=paragraph,
        trailing_space=text[int(char_ends[-1]) :],
    )


def _canonical(
    text: str, b: ByteArray, space: BoolArray, byte_starts: IntArray, byte_ends: IntArray,
    char_starts: IntArray, char_ends: IntArray, paragraph: BoolArray,
) -> tuple[str, IntArray, IntArray]:
    """The canonical text of the scanned words and each word's character offsets in it.

    Built with array operations: every whitespace byte is dropped except the first
    one or two of each inner run, which become ``" "`` or ``"\n\n"``.
    """
    sep = np.where(paragraph, 2, 1)
    sep[0] = 0
    lengths = char_ends - char_starts
    canon_starts = np.cumsum(sep + lengths) - lengths
    canon_ends = canon_starts + lengths
    gaps = byte_ends[:-1]
    para = paragraph[1:]
    if para.any() and bool((byte_starts[1:][para] - gaps[para] < 2).any()):
        # A one-character paragraph separator has no room for "\n\n" in place.
        words = [text[a:z] for a, z in zip(char_starts.tolist(), char_ends.tolist(), strict=True)]
        pieces = [words[0]]
        for word, mark in zip(words[1:], para.tolist(), strict=True):
            pieces.append("\n\n" if mark else " ")
            pieces.append(word)
        return "".join(pieces), canon_starts, canon_ends
    out = b.copy()
    keep = ~space
    keep[byte_ends[-1] :] = False
    out[gaps] = np.where(para, 0x0A, 0x20)
    keep[gaps] = True
    second = gaps[para] + 1
    out[second] = 0x0A
    keep[second] = True
    return out[keep].tobytes().decode("utf-8"), canon_starts, canon_ends


def _line_breaks(b: ByteArray, cls: ByteArray, data: bytes) -> tuple[IntArray, IntArray]:
    """Byte positions of line breaks (``\\r\\n`` counted once) and of paragraph separators."""
    breaks = np.flatnonzero(cls == _LINE)
    if b"\r" in data:
        cr = np.flatnonzero(cls == _CR)
        nxt = np.minimum(cr + 1, len(b) - 1)
        lone = cr[(cr + 1 >= len(b)) | (b[nxt] != 0x0A)]
        breaks = np.sort(np.concatenate([breaks, lone]))
    if any(c in data for c in b"\x0c\x1c\x1d\x1e"):
        separators = np.flatnonzero(cls == _PARAGRAPH)
    else:
        separators = np.empty(0, dtype=np.int64)
    return breaks, separators


def _empty_scan(text: str, b: ByteArray, *, trailing: str) -> WordScan:
    empty = np.empty(0, dtype=np.int64)
    return WordScan(
        source=text,
        data=b,
        byte_starts=empty,
        byte_ends=empty,
        text_starts=empty,
        text_ends=empty,
        input_starts=empty,
        input_ends=empty,
        paragraph=np.empty(0, dtype=np.bool_),
        trailing_space=trailing,
    )


def _scan_composed(text: str, leading_space: str) -> WordScan | None:
    """The scan of text without surrogates from two fast scans: of its cleaned form (no
    NUL, NFC) and of the text itself; None when a word vanished in cleaning.

    NFC never joins or splits words (no character gains or loses whitespace by it, and
    whitespace composes with nothing), nor does removing NULs unless a word is only
    NULs, so the scan of the cleaned form has the canonical words and the scan of the
    text itself their input offsets: 11 times faster than cleaning decomposed text
    word by word (``benchmarks/unclean_text.py``).
    """
    raw = _scan_clean(text, leading_space)
    if not len(raw):  # whitespace only: nothing to gain
        return None
    cleaned = text.replace("\x00", "") if "\x00" in text else text
    composed = _scan_clean(unicodedata.normalize("NFC", cleaned), leading_space)
    if len(composed) != len(raw):  # a word of NULs only: its gaps merge, word by word
        return None
    return replace(composed, input_starts=raw.input_starts, input_ends=raw.input_ends,
                   trailing_space=raw.trailing_space)


def _clean_word(word: str) -> str:
    return unicodedata.normalize("NFC", _DIRT.sub("", word))


def _scan_dirty(text: str, leading_space: str = "") -> WordScan:
    """The scan of text with NUL, surrogates or non-NFC sequences: :func:`_scan_composed`
    unless it holds a surrogate or a word of NULs only, else :func:`_scan_word_by_word`."""
    if _SURROGATE.search(text) is None:
        composed = _scan_composed(text, leading_space)
        if composed is not None:
            return composed
    return _scan_word_by_word(text, leading_space)


def _scan_word_by_word(text: str, leading_space: str = "") -> WordScan:
    """Per-word path for text with NUL, surrogates or non-NFC sequences.

    Words are cleaned one by one; a word that cleans to nothing vanishes and the
    whitespace around it merges. The canonical form is then scanned on the fast
    path and its offsets are mapped back to the input.
    """
    words: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    marks: list[bool] = []
    gap_start = 0
    gap = leading_space
    for m in _WORD.finditer(text):
        gap += text[gap_start : m.start()]
        gap_start = m.end()
        word = _clean_word(m.group())
        if not word:
            continue
        marks.append(is_paragraph_break(gap))
        gap = ""
        words.append(word)
        starts.append(m.start())
        ends.append(m.end())
    trailing = gap + text[gap_start:]
    pieces = []
    for k, word in enumerate(words):
        if k:
            pieces.append("\n\n" if marks[k] else " ")
        pieces.append(word)
    canonical = "".join(pieces)
    fast = _scan_clean(canonical)
    if len(fast) != len(words):  # pragma: no cover - NFC never creates whitespace
        raise AssertionError("normalizer invariant broken: word count changed by cleaning")
    paragraph = np.array(marks, dtype=np.bool_)
    return WordScan(
        source=canonical,
        data=fast.data,
        byte_starts=fast.byte_starts,
        byte_ends=fast.byte_ends,
        text_starts=fast.text_starts,
        text_ends=fast.text_ends,
        input_starts=np.array(starts, dtype=np.int64),
        input_ends=np.array(ends, dtype=np.int64),
        paragraph=paragraph,
        trailing_space=trailing,
    )
