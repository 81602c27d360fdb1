"""Byte-level content-defined chunking, for fine-grained change regions.

A polynomial rolling hash over a ``window_bytes`` window (base 257, modulus
2^61 - 1) marks a boundary after byte ``i`` when ``(hash & mask) == 0``, with
``mask = 2^(bit_length(avg) - 1) - 1``; no chunk is shorter than ``min_size``
(except the last) or longer than ``max_size``. Chunks carry BLAKE2b-128 digests.

The window hash is a 48-tap FIR filter over the bytes, computed exactly in
64-bit integers by splitting every power of the base into a high and a low part
(two ``np.convolve`` calls) and folding with ``2^61 = 1 (mod p)``.

Known limit: periodic input whose period is shorter than the window hashes the
same at every phase, so it has either a boundary every period or none; a short
periodic text (say 3 KB of one repeated 15-byte sentence) becomes one chunk, and
any edit to it changes everything.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from kbsync.core.chunking import compiled
from kbsync.core.chunking.params import ByteParams
from kbsync.core.chunking.tokens import TokenCounter
from kbsync.core.identity import ChunkIdentity
from kbsync.core.normalize import normalize, scan_words
from kbsync.model import Boundary, ByteChunk, Chunk

__all__ = [
    "BASE",
    "MODULUS",
    "byte_chunks",
    "iter_byte_chunks",
    "iter_spans",
    "params_for_length",
    "rolling_hashes",
    "text_byte_chunks",
]

BASE = 257
MODULUS = (1 << 61) - 1
_BLOCK = 1 << 17  # hashing a block holds some fifty bytes of arrays per byte
_WORD = re.compile(r"\S+")

# Sizes of the chunks compare() cuts a document into, chosen from its length.
SCALED_WINDOW_BYTES = 48
SCALED_MIN_CHUNKS = 16
SCALED_SMALLEST_AVG = 16
SCALED_LARGEST_AVG = 512

_taps: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}


def _window_taps(window: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    cached = _taps.get(window)
    if cached is None:
        coeffs = [pow(BASE, k, MODULUS) for k in range(window)]
        cached = (
            np.array([c >> 32 for c in coeffs], dtype=np.int64),
            np.array([c & 0xFFFFFFFF for c in coeffs], dtype=np.int64),
        )
        _taps[window] = cached
    return cached


def rolling_hashes(data: npt.NDArray[np.uint8], window: int) -> npt.NDArray[np.int64]:
    """``H[i] = sum(data[i - k] * 257**k for k < window) mod (2**61 - 1)``; bytes before 0 are 0."""
    if len(data) == 0:
        return np.empty(0, dtype=np.int64)
    hi_taps, lo_taps = _window_taps(window)
    x = data.astype(np.int64)
    n = len(x)
    high = np.convolve(x, hi_taps)[:n]  # < 2^43
    low = np.convolve(x, lo_taps)[:n]  # < 2^46
    # high * 2^32 = (a * 2^29 + r) * 2^32 = a * 2^61 + r * 2^32 = a + r * 2^32 (mod p)
    h = (high >> 29) + ((high & ((1 << 29) - 1)) << 32) + low
    h = (h & MODULUS) + (h >> 61)
    return np.where(h >= MODULUS, h - MODULUS, h)


def params_for_length(length: int) -> ByteParams:
    """Byte-CDC sizes for comparing documents of ``length`` bytes: at least 16 chunks each.

    The average is the largest power of two with ``1.25 * avg * 16 <= length``
    (a chunk is on average ``min + avg`` long), kept within 16..512 bytes; the
    minimum is a quarter of it and the maximum four times it. The rolling-hash
    window stays 48 bytes whatever the sizes, so one edit moves at most the cut
    points within 48 bytes after it.
    """
    target = max(1, length * 4 // (5 * SCALED_MIN_CHUNKS))
    avg = min(SCALED_LARGEST_AVG, max(SCALED_SMALLEST_AVG, 1 << (target.bit_length() - 1)))
    return ByteParams(window_bytes=SCALED_WINDOW_BYTES, min_size=avg // 4, avg_size=avg,
                      max_size=avg * 4)


def byte_chunks(data: bytes, params: ByteParams | None = None) -> list[ByteChunk]:
    """Chunks of ``data`` (one-shot; identical to :func:`iter_byte_chunks` over any split)."""
    return list(iter_byte_chunks([data], params))


def iter_byte_chunks(
    pieces: Iterable[bytes], params: ByteParams | None = None
) -> Iterator[ByteChunk]:
    """Chunks of the concatenation of ``pieces``, each yielded as soon as it is final."""
    p = params or ByteParams()
    if compiled.byte_chunks_available(p):
        yield from _compiled_chunks(pieces, p)
        return
    for index, (offset, data, _) in enumerate(iter_spans(pieces, p)):
        yield ByteChunk(index, offset, len(data), _digest(data))


def _compiled_chunks(pieces: Iterable[bytes], params: ByteParams) -> Iterator[ByteChunk]:
    """:func:`iter_byte_chunks` with spans, digests and chunks made by the compiled kernel."""
    window = params.window_bytes
    history = b""
    pending = b""
    offset = index = 0  # offset of pending[0] in the whole input; number of the next chunk
    for piece in _regroup(pieces):
        raw = b"".join((history, pending, piece))  # the one copy of the block
        lead = len(history)
        chunks, consumed = compiled.byte_chunks(raw, lead, params, offset, index, ended=False)
        yield from chunks
        end = lead + consumed
        history, pending = raw[max(0, end - window):end], raw[end:]
        offset += consumed
        index += len(chunks)
    if pending:
        yield from compiled.byte_chunks(history + pending, len(history), params, offset, index,
                                        ended=True)[0]


def text_byte_chunks(
    text: str, params: ByteParams, identity: ChunkIdentity, counter: TokenCounter
) -> Iterator[Chunk]:
    """Byte-CDC chunks of the normalized form of ``text``, as :class:`Chunk` values.

    Cuts never split a UTF-8 character, so each chunk's text is a slice of the
    canonical text; offsets are mapped back to ``text``.
    """
    norm = normalize(text)
    canonical = norm.text
    data = canonical.encode("utf-8")
    b = np.frombuffer(data, dtype=np.uint8)
    char_at = np.zeros(len(b) + 1, dtype=np.int64)
    np.cumsum((b & 0xC0) != 0x80, out=char_at[1:])
    found = [(m.start(), m.end() - m.start()) for m in _WORD.finditer(canonical)]
    word_starts = [a for a, _ in found]
    lengths = [n for _, n in found]  # of the normalized words
    starts: list[int] = norm.word_starts.tolist()
    ends: list[int] = norm.word_ends.tolist()

    def to_input(x: int, *, is_end: bool) -> int:
        i = bisect_right(word_starts, x) - 1
        if i < 0:
            return starts[0] if starts else 0
        inside, length = x - word_starts[i], lengths[i]
        same = length == ends[i] - starts[i]
        if not same and 0 < inside < length:
            # Normalizing changed the word's length (composed accents): map by its pieces.
            return starts[i] + _inside_word(text[starts[i]:ends[i]], length, inside,
                                            is_end=is_end)
        if inside <= length and (is_end or inside < length):
            return starts[i] + inside if same else starts[i] if inside == 0 else ends[i]
        return ends[i] if is_end or i + 1 >= len(starts) else starts[i + 1]

    for index, (offset, piece, kind) in enumerate(iter_spans([data], params, utf8=True)):
        a, z = int(char_at[offset]), int(char_at[offset + len(piece)])
        chunk_text = canonical[a:z]
        yield Chunk(
            index=index,
            text=chunk_text,
            start=to_input(a, is_end=False),
            end=to_input(z, is_end=True),
            token_count=int(counter.count(scan_words(chunk_text)).sum()),
            boundary=kind,
            identity=identity(chunk_text),
        )


def _inside_word(word: str, length: int, inside: int, *, is_end: bool) -> int:
    """The offset in ``word`` (as the input has it) of ``inside`` characters of its
    normalized form, ``length`` characters long where the input's is not.

    NFC composes a character only with the non-starters after it (and Hangul jamo
    with the vowel and final jamo after them), so the word is normalized a piece at a
    time, each piece a starter and what follows it; a cut inside a piece's normalized
    text takes the whole piece into the chunk it ends (``is_end``), or into the one it
    starts. A word whose pieces do not normalize to its whole is mapped to its ends.
    """
    cuts = [k for k, c in enumerate(word)
            if k == 0 or (unicodedata.combining(c) == 0 and not "\u1160" <= c <= "\u11ff")]
    done = 0
    pieces = []
    for a, z in zip(cuts, [*cuts[1:], len(word)], strict=True):
        piece = normalize(word[a:z]).text
        pieces.append((a, z, done, done + len(piece)))
        done += len(piece)
    if done != length:
        return len(word) if is_end else 0
    for a, z, lo, hi in pieces:
        if inside <= lo:
            return a
        if inside < hi:
            return z if is_end else a
    return len(word)


def iter_spans(
    pieces: Iterable[bytes], params: ByteParams, *, utf8: bool = False
) -> Iterator[tuple[int, bytes, Boundary]]:
    """``(offset, bytes, boundary kind)`` of each chunk, as soon as it is final.

    With ``utf8`` true no cut falls inside a multi-byte UTF-8 character (a
    candidate inside one is skipped, a maximum-size cut steps back to the
    character's start), so every chunk decodes on its own.
    """
    window = params.window_bytes
    history = b""
    pending = b""
    offset = 0  # offset of pending[0] in the whole input
    for piece in _regroup(pieces):
        pending += piece
        cuts = _cuts(history, pending, params, utf8, ended=False)
        for start, end, kind in cuts:
            yield offset + start, pending[start:end], kind
        consumed = cuts[-1][1] if cuts else 0
        if consumed:
            history = (history + pending[:consumed])[-window:]
            pending = pending[consumed:]
            offset += consumed
    for start, end, kind in _cuts(history, pending, params, utf8, ended=True):
        yield offset + start, pending[start:end], kind


def _regroup(pieces: Iterable[bytes]) -> Iterator[bytes | memoryview]:
    """The input in blocks of ``_BLOCK`` bytes (the last shorter), however it was split.

    A big piece is cut too: hashed whole, one document would cost some fifty
    bytes of arrays per byte at once. Its whole blocks are views of it, not copies.
    """
    buffer = bytearray()
    for piece in pieces:
        view = memoryview(piece)
        while not buffer and len(view) >= _BLOCK:
            yield view[:_BLOCK]
            view = view[_BLOCK:]
        while view:
            take = _BLOCK - len(buffer)
            buffer += view[:take]
            view = view[take:]
            if len(buffer) >= _BLOCK:
                yield bytes(buffer)
                buffer.clear()
    if buffer:
        yield bytes(buffer)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _cuts(
    history: bytes, pending: bytes, params: ByteParams, utf8: bool, *, ended: bool
) -> list[tuple[int, int, Boundary]]:
    """Final (start, end) spans of ``pending``; an unfinished tail is left for more input."""
    n = len(pending)
    if n == 0:
        return []
    fused = compiled.byte_spans(history + pending, len(history), params, utf8, ended=ended)
    if fused is not None:  # the same spans from the compiled kernel
        return fused
    lead = len(history)
    raw = np.frombuffer(history + pending, dtype=np.uint8)
    hashes = rolling_hashes(raw, params.window_bytes)[lead:]
    b = raw[lead:]
    # Candidate: a cut after byte i, i.e. a chunk end at i + 1.
    ends = np.flatnonzero((hashes & params.mask) == 0) + 1
    if utf8 and len(ends):
        follow = b[np.minimum(ends, n - 1)]
        ends = ends[(ends == n) | ((follow & 0xC0) != 0x80)]
    candidates: list[int] = ends.tolist()
    spans: list[tuple[int, int, Boundary]] = []
    s = 0
    while s < n:
        i = bisect_left(candidates, s + params.min_size)
        if i < len(candidates) and candidates[i] - s <= params.max_size:
            e, kind = candidates[i], Boundary.PRIMARY
        elif n - s > params.max_size:
            e, kind = s + params.max_size, Boundary.HARD
            if utf8:
                while e > s + 1 and (b[e] & 0xC0) == 0x80:
                    e -= 1
        elif ended:
            e, kind = n, Boundary.FINAL
        else:
            break
        spans.append((s, e, kind))
        s = e
    return spans
