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

import numpy as np

from kbsync.embed import Vectors
from kbsync.errors import ParameterError
from kbsync.stopwords import STOPWORDS

__all__ = ["HashingEmbedder"]

_TOKEN = re.compile(r"\w+")
_STOPWORDS = STOPWORDS


@lru_cache(maxsize=1 << 17)
def _code(feature: str) -> int:
    return zlib.crc32(feature.encode())


@lru_cache(maxsize=1 << 17)
def _stem(word: str) -> str:
    """A light suffix stripper: "retries", "retried", "retrying" all become "retr"."""
    for suffix in ("ying", "ies", "ied", "ing", "ed", "es", "s", "y"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


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
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        dim = self._dimension
        for row, text in enumerate(texts):
            words = [_stem(w) for w in _TOKEN.findall(text.lower()) if w not in _STOPWORDS]
            if not words:
                continue
            # A bigram's code is the CRC of "a b", continued from the CRC of "a ".
            heads = [_code(w + " ") for w in words[:-1]]
            codes = np.fromiter(
                [_code(w) for w in words]
                + [zlib.crc32(b.encode(), h) for h, b in zip(heads, words[1:], strict=True)],
                dtype=np.uint32, count=2 * len(words) - 1,
            )
            unique, counts = np.unique(codes, return_counts=True)
            weights = (1.0 + np.log(counts)).astype(np.float32)
            signs = np.where(unique & 0x80000000, -1.0, 1.0).astype(np.float32)
            np.add.at(out[row], (unique % dim).astype(np.int64), signs * weights)
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
        return out
