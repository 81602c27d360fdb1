"""The compiled kernel's scans of a block of text: :func:`normalize`'s words and
:func:`~kbsync.core.compare.compare`'s, made in C when the kernel is built.

Each function returns None where the NumPy reference of :mod:`kbsync.core.normalize`
must do the work (no kernel, text that needs cleaning), so the two always agree.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbsync.core import native
from kbsync.core.words import BoolArray, IntArray, WordScan, is_paragraph_break

__all__ = ["CanonicalWords", "Words", "canonical_words", "compiled_words", "scan_compiled"]

_WORDS_SCAN = 1  # kernel.scan's mode with what normalize() needs
_COMPARE_SCAN = 3  # and with what compare() needs


@dataclass(frozen=True, slots=True, eq=False)
class Words:
    """The canonical text of a piece of text and its words' offsets in it: what
    :func:`normalize` and the chunkers' cutters need of a scan, which the compiled
    kernel makes without the other arrays of a :class:`WordScan`."""

    source: str
    input_starts: IntArray
    input_ends: IntArray
    paragraph: BoolArray
    trailing_space: str


def _kernel_scan(text: str, mode: int, composed: str | None = None) -> tuple[Any, ...] | None:
    """``kernel.scan(text)`` in ``mode`` without fingerprints, or None: no kernel, no word,
    or text that needs cleaning (NUL, surrogates), which the reference handles. Text that
    is only not NFC is scanned in its NFC form (:func:`_kernel_scan_composed`), which the
    caller may have made already (``composed``)."""
    kernel = native.kernel
    if kernel is None:
        return None
    quick = getattr(kernel, "NFC_UNIDATA_VERSION", None) == unicodedata.unidata_version
    try:
        got = 0 if composed is not None else kernel.scan(text, 0, b"", quick, mode)
        if got == 0:  # a code point that might not be NFC: unicodedata decides
            composed = composed or unicodedata.normalize("NFC", text)
            got = (kernel.scan(text, 0, b"", False, mode) if composed == text
                   else _kernel_scan_composed(text, composed, mode))
    except UnicodeEncodeError:  # a surrogate
        return None
    return got if isinstance(got, tuple) else None


# Where kernel.scan's result holds the words' input offsets (starts, then ends), by mode;
# its last item, in every mode, is where the whitespace after the last word starts.
_INPUT_OFFSETS = {_WORDS_SCAN: 1, _COMPARE_SCAN: 6}


def _kernel_scan_composed(text: str, composed: str, mode: int) -> tuple[Any, ...] | None:
    """``kernel.scan`` of ``text``, which is not NFC, from a scan of ``composed`` (its NFC)
    and the input offsets of a scan of ``text`` itself, as :func:`_scan_composed` does."""
    kernel = native.kernel
    assert kernel is not None
    raw = kernel.scan(text, 0, b"", False, _WORDS_SCAN)
    if not isinstance(raw, tuple):  # no words, or a NUL
        return None
    got = kernel.scan(composed, 0, b"", False, mode)
    if not isinstance(got, tuple):  # pragma: no cover - NFC removes no word
        return None
    at = _INPUT_OFFSETS[mode]
    if len(got[at]) != len(raw[1]):  # pragma: no cover - NFC never creates whitespace
        return None
    return (*got[:at], raw[1], raw[2], *got[at + 2 : -1], raw[-1])


def compiled_words(text: str, leading_space: str, composed: str | None = None) -> Words | None:
    """The words of ``text`` by the compiled kernel, or None (see :func:`_kernel_scan`):
    then :func:`scan_words` has them. ``composed`` is the NFC of ``text``, when known."""
    got = _kernel_scan(text, _WORDS_SCAN, composed)
    if got is None:
        return None
    source, ins, ine, para, trailing = got
    paragraph = np.frombuffer(para, dtype=np.bool_)
    input_starts = np.frombuffer(ins, dtype=np.int64)
    if leading_space:
        paragraph[0] = is_paragraph_break(leading_space + text[: int(input_starts[0])])
    return Words(source, input_starts, np.frombuffer(ine, dtype=np.int64), paragraph,
                  text[trailing:])


@dataclass(frozen=True, slots=True, eq=False)
class CanonicalWords:
    """The canonical text of a whole text, its UTF-8, and every word's offsets there (in
    characters and in bytes) and in the input: what a comparison of two versions reads."""

    text: str
    data: bytes
    starts: IntArray
    ends: IntArray
    byte_starts: IntArray
    byte_ends: IntArray
    input_starts: IntArray
    input_ends: IntArray


def canonical_words(text: str) -> CanonicalWords | None:
    """:class:`CanonicalWords` of ``text`` in one pass of the compiled kernel, or None (no
    kernel, no word, text that needs cleaning, or text past the kernel's whole-text limit):
    then the caller scans with the reference."""
    if len(text) > _COMPILED_SCAN_LIMIT:
        return None
    got = _kernel_scan(text, _COMPARE_SCAN)
    if got is None:
        return None
    source, data, ts, te, bs, be, ins, ine, _ = got
    return CanonicalWords(
        source, data, *(np.frombuffer(a, dtype=np.int64) for a in (ts, te, bs, be, ins, ine))
    )


# Above this many characters a whole-text scan takes the NumPy path: the kernel keeps a
# record of about 100 bytes per word while it scans (about 40 times the text at its peak,
# the NumPy path about 18), and the chunkers scan block by block anyway.
_COMPILED_SCAN_LIMIT = 1 << 20


def scan_compiled(text: str, leading_space: str) -> WordScan | None:
    """:func:`_scan_clean` by the compiled kernel (one fused pass); None when it has no words
    or the text is too long for the kernel's working memory."""
    if len(text) > _COMPILED_SCAN_LIMIT:
        return None
    got = native.kernel.scan(text, 0, b"") if native.kernel is not None else None
    if got is None:
        return None
    source, data, bs, be, ts, te, ins, ine, para = got[:9]
    paragraph = np.frombuffer(para, dtype=np.bool_)
    input_starts = np.frombuffer(ins, dtype=np.int64)
    if leading_space:
        paragraph[0] = is_paragraph_break(leading_space + text[: int(input_starts[0])])
    return WordScan(
        source=source,
        data=np.frombuffer(data, dtype=np.uint8),
        byte_starts=np.frombuffer(bs, dtype=np.int64),
        byte_ends=np.frombuffer(be, dtype=np.int64),
        text_starts=np.frombuffer(ts, dtype=np.int64),
        text_ends=np.frombuffer(te, dtype=np.int64),
        input_starts=input_starts,
        input_ends=np.frombuffer(ine, dtype=np.int64),
        paragraph=paragraph,
        trailing_space=text[got[13]:],
    )
