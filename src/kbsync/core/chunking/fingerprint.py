"""Vectorized word hashes and rolling window fingerprints over them.

Every hash here is a polynomial in wrapping 64-bit arithmetic. The bases are odd,
so they are invertible modulo 2^64, and the hash of any substring (or window of
words) is a difference of prefix sums times a power of the inverse: one
``cumsum`` per block instead of a loop per word. The low bits of such a
polynomial are weak (bit ``i`` depends only on the low ``i`` bits of each term),
so every value is passed through a strong 64-bit mixer before a mask is tested.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["WINDOW_BASE", "WORD_BASE", "mix64", "powers", "window_fingerprints", "word_hashes"]

U64 = npt.NDArray[np.uint64]

WORD_BASE = 0x100000001B3  # odd
WINDOW_BASE = 0x9E3779B97F4A7C15  # odd
_MASK64 = (1 << 64) - 1

_tables: dict[int, tuple[U64, U64]] = {}


def powers(base: int, n: int) -> tuple[U64, U64]:
    """``base**i`` and ``base**-i`` modulo 2^64 for ``i < n`` (cached, grown on demand)."""
    cached = _tables.get(base)
    if cached is not None and len(cached[0]) >= n:
        return cached
    size = max(n, 1 << 16, 2 * len(cached[0]) if cached else 0)
    inverse = pow(base, -1, 1 << 64)
    fwd = np.full(size, base, dtype=np.uint64)
    fwd[0] = 1
    inv = np.full(size, inverse, dtype=np.uint64)
    inv[0] = 1
    np.cumprod(fwd, out=fwd)
    np.cumprod(inv, out=inv)
    _tables[base] = (fwd, inv)
    return fwd, inv


def mix64(x: U64) -> U64:
    """The splitmix64 finalizer, elementwise: every output bit depends on every input bit."""
    z = x ^ (x >> np.uint64(30))
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def word_hashes(data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64],
                ends: npt.NDArray[np.int64]) -> U64:
    """A mixed 64-bit hash of each word ``data[starts[i]:ends[i]]``."""
    n = len(data)
    fwd, inv = powers(WORD_BASE, n + 1)
    prefix = np.zeros(n + 1, dtype=np.uint64)
    terms = data.astype(np.uint64)
    terms *= fwd[:n]
    np.cumsum(terms, out=prefix[1:])
    raw = (prefix[ends] - prefix[starts]) * inv[starts]
    return mix64(raw ^ (ends - starts).astype(np.uint64))


def window_fingerprints(history: U64, hashes: U64, window: int) -> U64:
    """The window fingerprint at each word of ``hashes``: a polynomial of its last ``window`` words.

    ``history`` holds the ``window - 1`` word hashes that precede ``hashes`` (zeros at
    the start of a text), so a block boundary never changes a fingerprint.
    """
    seq = np.concatenate([history, hashes])
    m = len(seq)
    fwd, inv = powers(WINDOW_BASE, m + 1)
    prefix = np.zeros(m + 1, dtype=np.uint64)
    np.cumsum(seq * inv[:m], out=prefix[1:])
    k = np.arange(window - 1, m)
    raw = (prefix[k + 1] - prefix[k + 1 - window]) * fwd[k]
    return mix64(raw)
