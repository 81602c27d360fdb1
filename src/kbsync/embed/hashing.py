"""A deterministic, offline embedder: feature hashing of word unigrams and bigrams.

It needs no model and no network, gives the same vector on every machine, and
is good enough to make search work on a fresh install and in tests. Real
models plug in behind the same protocol.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

import numpy as np

from kbsync.embed import Vectors
from kbsync.errors import ParameterError
from kbsync.stopwords import STOPWORDS

__all__ = ["HashingEmbedder"]

_TOKEN = re.compile(r"\w+")
_STOPWORDS = STOPWORDS


def _stem(word: str) -> str:
    """A light suffix stripper: "retries", "retried", "retrying" all become "retr"."""
    for suffix in ("ying", "ies", "ied", "ing", "ed", "es", "s", "y"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=1 << 17)
def _features(word: str) -> tuple[bytes, int, int]:
    """A word's stem (UTF-8), the stem's code, and the code of the stem and a space, from
    which a bigram's code continues."""
    stem = _stem(word).encode()
    return stem, zlib.crc32(stem), zlib.crc32(stem + b" ")


class HashingEmbedder:
    """Signed feature hashing (CRC32) of lower-cased content words and their bigrams.

    Counts are damped (``1 + log(count)``) and rows L2-normalized, so cosine
    similarity rewards shared topic words rather than long texts.
    """

    version = "hashing-v1"

    def __init__(self, dimension: int = 1024) -> None:
        if dimension < 8:
            raise ParameterError(f"the hashing embedder needs dimension >= 8, got {dimension}")
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_input_tokens(self) -> int | None:
        return None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(_TOKEN.findall(t)) for t in texts]

    @property
    def identity(self) -> str:
        return f"{self.version}:stemmed-unigram+bigram:log-tf:{self._dimension}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        dim = self._dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        rows: list[int] = []
        codes: list[int] = []
        for row, text in enumerate(texts):
            words = [_features(w) for w in _TOKEN.findall(text.lower()) if w not in _STOPWORDS]
            if not words:
                continue
            codes += [code for _, code, _ in words]
            # A bigram's code is the CRC of "a b", continued from the CRC of "a ".
            codes += [zlib.crc32(b[0], a[2]) for a, b in pairwise(words)]
            rows += [row] * (2 * len(words) - 1)
        if not codes:
            return out
        # One count of every (row, code) pair for the whole batch, in (row, code) order:
        # each row's buckets take their terms in the order a row-by-row count gives them.
        keys = np.array(rows, dtype=np.uint64) << np.uint64(32) | np.array(codes, np.uint64)
        unique, counts = np.unique(keys, return_counts=True)
        code = (unique & np.uint64(0xFFFFFFFF)).astype(np.int64)
        weights = (1.0 + np.log(counts)).astype(np.float32)
        signs = np.where(code & 0x80000000, -1.0, 1.0).astype(np.float32)
        np.add.at(out, ((unique >> np.uint64(32)).astype(np.int64), code % dim), signs * weights)
        for row in dict.fromkeys(rows):
            norm = float(np.linalg.norm(out[row]))  # row by row: the sum a batch norm differs in
            if norm:
                out[row] /= norm
        return out
