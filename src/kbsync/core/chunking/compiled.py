"""The compiled kernel's paths through chunking, beside the NumPy reference they mirror.

Each function here returns None when the kernel is not loaded (``kbsync.core.native``) or
cannot serve the input, and the caller then runs the NumPy reference, which stays the
definition: tests/unit/test_kernel_equivalence.py requires identical blocks, chunks,
offsets, boundary kinds and identities from both. Text that needs cleaning (NUL,
surrogates, non-NFC) is always scanned by the reference, one block at a time; the
kernel takes over again at the next clean block.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from kbsync.core import native
from kbsync.core.chunking import stream
from kbsync.core.chunking.fingerprint import U64
from kbsync.core.chunking.params import ByteParams, LocalParams, SentenceParams, TTTDParams
from kbsync.core.chunking.tokens import EstimatingCounter, TokenCounter
from kbsync.core.identity import ChunkIdentity
from kbsync.core.normalize import (
    BLOCK_CHARS,
    IntArray,
    compiled_words,
    is_paragraph_break,
    iter_blocks,
    scan_words,
)
from kbsync.model import Boundary, ByteChunk, Chunk

__all__ = ["build_chunks", "byte_chunks", "byte_chunks_available", "byte_spans", "local_chunks",
           "local_cuts", "scan_block", "tttd_chunks"]

_TTTD_KINDS = (Boundary.PRIMARY, Boundary.BACKUP, Boundary.HARD, Boundary.FINAL)
_LOCAL_KINDS = (Boundary.PRIMARY, Boundary.HARD, Boundary.FORCED, Boundary.FINAL,
                Boundary.TAIL)
_NOT_SPACE = re.compile(r"\S")
_NO_FLAGS = np.zeros(0, dtype=np.bool_)
# The kernel keeps counts in 64-bit integers and the window in an array: parameters past
# these bounds (far beyond any real use) run on the reference, which has no such limits.
_MAX_WINDOW = 1 << 24
_MAX_TOKENS = 1 << 40
_CHUNKER_SCAN = 2  # kernel.scan's mode without the bytes the chunkers do not read


def _quick_nfc(kernel: object) -> bool:
    """Whether the kernel's NFC quick check was tabulated from this Python's Unicode data."""
    return getattr(kernel, "NFC_UNIDATA_VERSION", None) == unicodedata.unidata_version


def _nfc(text: str) -> bool:
    return text.isascii() or unicodedata.is_normalized("NFC", text)


def _estimates(counter: TokenCounter) -> bool:
    # The kernel computes EstimatingCounter's counts; any other counter runs on the arrays.
    return type(counter) is EstimatingCounter


def scan_block(
    text: str, leading: str, history: U64, window: int, base: int, with_sentences: bool,
    counter: TokenCounter,
) -> tuple[stream.WordBlock, U64, str] | None:
    """One block of :func:`stream.word_blocks` in a single pass: (block, history, trailing)."""
    kernel = native.kernel
    if kernel is None or window > _MAX_WINDOW or not _estimates(counter):
        return None
    quick = _quick_nfc(kernel)
    if not quick and not _nfc(text):
        return None
    try:
        got = kernel.scan(text, window, history, quick, _CHUNKER_SCAN, with_sentences)
        if got == 0:  # a code point that might not be NFC: unicodedata decides
            got = (kernel.scan(text, window, history, False, _CHUNKER_SCAN, with_sentences)
                   if _nfc(text) else None)
    except UnicodeEncodeError:  # a surrogate: the reference cleans it
        return None
    if got is None:  # no words, or a NUL
        return None
    source, ts, te, ins, ine, para, tokens, sentence, fp, hist, trailing = got
    paragraph = np.frombuffer(para, dtype=np.bool_)
    input_starts = np.frombuffer(ins, dtype=np.int64)
    if leading:
        paragraph[0] = is_paragraph_break(leading + text[: int(input_starts[0])])
    block = stream.WordBlock(
        source=source,
        text_starts=np.frombuffer(ts, dtype=np.int64),
        text_ends=np.frombuffer(te, dtype=np.int64),
        input_starts=input_starts + base,
        input_ends=np.frombuffer(ine, dtype=np.int64) + base,
        paragraph=paragraph,
        sentence_end=np.frombuffer(sentence, dtype=np.bool_) if with_sentences else _NO_FLAGS,
        tokens=np.frombuffer(tokens, dtype=np.int64),
        fingerprint=np.frombuffer(fp, dtype=np.uint64),
    )
    return block, np.frombuffer(hist, dtype=np.uint64), text[trailing:]


def tttd_chunks(
    pieces: Iterable[str], counter: TokenCounter, params: TTTDParams, identity: ChunkIdentity,
    block_chars: int = BLOCK_CHARS,
) -> Iterator[Chunk] | None:
    """TTTD chunks of ``pieces`` from bytes to Chunk objects in the kernel (tttd.tttd_chunks)."""
    kernel = native.kernel
    if kernel is None or not _estimates(counter):
        return None
    if (params.window_words > _MAX_WINDOW
            or max(params.max_tokens, params.snap_window_words) > _MAX_TOKENS):
        return None
    cutter = kernel.TTTDCutter(
        params.window_words, params.min_tokens, params.max_tokens, params.primary_bits,
        params.backup_bits, params.snap, params.snap_window_words, Chunk, _TTTD_KINDS,
        identity.prefix,
    )
    return _fed(cutter, pieces, block_chars, _quick_nfc(kernel))


def local_chunks(
    pieces: Iterable[str], counter: TokenCounter, params: LocalParams | SentenceParams,
    identity: ChunkIdentity, block_chars: int = BLOCK_CHARS,
) -> Iterator[Chunk] | None:
    """Chunks of ``pieces`` under the strictly local rules (local.local_chunks) or, with
    :class:`SentenceParams`, the sentence-aware ones (sentences.sentence_chunks), from bytes
    to Chunk objects in the kernel."""
    kernel = native.kernel
    if kernel is None or not _estimates(counter) or params.window_words > _MAX_WINDOW \
            or params.max_tokens > _MAX_TOKENS:
        return None
    tail = (params.tail_above, params.tail_min, params.tail_max) \
        if isinstance(params, SentenceParams) and params.tail_above else (0, 0, 0)
    cutter = kernel.LocalCutter(
        params.window_words, params.min_tokens, params.span, params.reach,
        isinstance(params, SentenceParams), Chunk, _LOCAL_KINDS, identity.prefix, *tail,
    )
    return _fed(cutter, pieces, block_chars, _quick_nfc(kernel))


def _fed(cutter: object, pieces: Iterable[str], block_chars: int, quick: bool
         ) -> Iterator[Chunk]:
    """The chunks a cutter of the kernel makes of the blocks of ``pieces``."""
    feed, feed_scanned = cutter.feed, cutter.feed_scanned  # type: ignore[attr-defined]
    # The reference scans each block with the whitespace that ended the text before it
    # (its `leading`). The kernel carries that whitespace itself, except after a block the
    # reference cleaned: then the first word's paragraph mark is worked out here.
    last: tuple[str, str | None] | None = None  # last block with words; its trailing if cleaned
    since: list[str] = []  # blocks without words after it
    exact = True  # the kernel saw every whitespace character since the last word

    def leading() -> str:
        head = ""
        if last is not None:
            text, trailing = last
            head = trailing if trailing is not None else text[len(text.rstrip()):]
        return head + "".join(since)

    for text in iter_blocks(pieces, block_chars):
        chunks = None
        composed = None
        has_words = not text.isspace()
        if quick or _nfc(text):
            first = -1
            if not exact and has_words:
                start = _NOT_SPACE.search(text)
                first = int(is_paragraph_break(leading() + text[: start.start() if start else 0]))
            # The kernel declines (None) a block with a NUL or a surrogate; unsure of NFC
            # (0), it asks unicodedata once for the block, whose NFC form, if it differs,
            # is scanned below.
            chunks = feed(text, first, quick)
            if chunks == 0:
                composed = unicodedata.normalize("NFC", text)
                chunks = feed(text, first, False) if composed == text else None
            if chunks is not None:
                if has_words:
                    last, since, exact = (text, None), [], True
                else:
                    since.append(text)
        if chunks is None:
            scan = compiled_words(text, leading(), composed) or scan_words(text, leading())
            exact = False
            if len(scan.input_starts):
                last, since = (text, scan.trailing_space), []
                chunks = feed_scanned(scan.source, scan.input_starts.tobytes(),
                                      scan.input_ends.tobytes(), bool(scan.paragraph[0]),
                                      len(text))
            else:
                since.append(text)
                chunks = feed_scanned("", b"", b"", False, len(text))
        yield from chunks
    yield from cutter.finish()  # type: ignore[attr-defined]


def local_cuts(
    fingerprint: U64, tokens: IntArray, radius: int, span: int,
    ranks: npt.NDArray[np.uint8] | None, eligible_below: int, first: bool, last: bool,
) -> tuple[IntArray, npt.NDArray[np.uint8]] | None:
    """local.select_cut_codes by the kernel: cut positions and kind codes (local.KINDS)."""
    kernel = native.kernel
    if kernel is None or max(radius, span) > _MAX_TOKENS:
        return None
    cuts, codes = kernel.local_cuts(
        np.ascontiguousarray(fingerprint, dtype=np.uint64), _i64(tokens), radius, span,
        b"" if ranks is None else np.ascontiguousarray(ranks, dtype=np.uint8), eligible_below,
        first, last)
    return np.frombuffer(cuts, dtype=np.int64), np.frombuffer(codes, dtype=np.uint8)


def build_chunks(
    source: str, text_starts: IntArray, text_ends: IntArray, input_starts: IntArray,
    input_ends: IntArray, cum: IntArray, cuts: IntArray, codes: npt.NDArray[np.uint8],
    identity: ChunkIdentity, *, start: int = 0, index: int = 0,
) -> list[Chunk] | None:
    """The chunks between consecutive ``cuts`` (local.local_chunks), built in the kernel.

    ``codes`` are the cuts' kinds as indices into local.KINDS. The first chunk starts at
    word ``start`` and is numbered ``index``; token counts are differences of the running
    sums ``cum``.
    """
    kernel = native.kernel
    if kernel is None:
        return None
    chunks: list[Chunk] = kernel.build_chunks(
        source, _i64(text_starts), _i64(text_ends), _i64(input_starts), _i64(input_ends),
        _i64(cum), _i64(cuts), np.ascontiguousarray(codes, dtype=np.uint8), _LOCAL_KINDS, Chunk,
        identity.prefix, start,
        index,
    )
    return chunks


_BYTE_KINDS = (Boundary.PRIMARY, Boundary.HARD, Boundary.FINAL)


def byte_spans(raw: bytes, lead: int, params: ByteParams, utf8: bool, *, ended: bool
               ) -> list[tuple[int, int, Boundary]] | None:
    """bytecdc._cuts over ``raw[lead:]`` by the kernel: (start, end, kind) of final spans."""
    kernel = native.kernel
    if kernel is None:
        return None
    flat = np.frombuffer(kernel.byte_spans(raw, lead, params.window_bytes, params.mask,
                                           params.min_size, params.max_size, utf8, ended),
                         dtype=np.int64).tolist()
    kinds = _BYTE_KINDS
    return [(flat[k], flat[k + 1], kinds[flat[k + 2]]) for k in range(0, len(flat), 3)]


def byte_chunks_available(params: ByteParams) -> bool:
    """Whether :func:`byte_chunks` can serve chunking with ``params``."""
    return native.kernel is not None


def byte_chunks(raw: bytes, lead: int, params: ByteParams, offset: int, index: int, *,
                ended: bool) -> tuple[list[ByteChunk], int]:
    """The final chunks of ``raw[lead:]`` by the kernel (bytecdc.iter_byte_chunks), numbered
    from ``index`` at ``offset``, and how many bytes of ``raw[lead:]`` they cover."""
    kernel = native.kernel
    assert kernel is not None
    chunks, consumed = kernel.byte_chunks(raw, lead, params.window_bytes, params.mask,
                                          params.min_size, params.max_size, ended, ByteChunk,
                                          offset, index)
    return chunks, consumed


def _i64(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    # A contiguous array is handed over as a buffer, without the copy tobytes() makes.
    return np.ascontiguousarray(values, dtype=np.int64)
