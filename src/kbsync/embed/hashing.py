"""A deterministic, offline embedder: feature hashing of word unigrams and bigrams.

It needs no model and no network, gives the same vector on every machine, and
is good enough to make search work on a fresh install and in tests. Real
models plug in behind the same protocol.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from kbsync.embed import Vectors
from kbsync.errors import ParameterError

__all__ = ["HashingEmbedder"]

_TOKEN = re.compile(r"\w+")


class HashingEmbedder:
    """Signed feature hashing (CRC32) of lower-cased unigrams and bigrams, L2-normalized."""

    version = "hashing-v1"

    def __init__(self, dimension: int = 256) -> None:
        if dimension < 8:
            raise ParameterError(f"the hashing embedder needs dimension >= 8, got {dimension}")
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def identity(self) -> str:
        return f"{self.version}:unigram+bigram:{self._dimension}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        dim = self._dimension
        for row, text in enumerate(texts):
            words = _TOKEN.findall(text.lower())
            features = words + [f"{a} {b}" for a, b in pairwise(words)]
            if not features:
                continue
            codes = np.fromiter((zlib.crc32(f.encode()) for f in features), dtype=np.uint32,
                                count=len(features))
            signs = np.where(codes & 0x80000000, -1.0, 1.0).astype(np.float32)
            np.add.at(out[row], (codes % dim).astype(np.int64), signs)
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
        return out
