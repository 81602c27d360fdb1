"""An embedder that counts what it embeds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kbsync.embed import Vectors
from kbsync.embed.hashing import HashingEmbedder
from kbsync.model import VectorNorm

__all__ = ["CountingEmbedder", "WordReranker"]


class CountingEmbedder:
    """The hashing embedder, counting texts embedded; can be told to fail on some texts,
    and to have an input ``window`` (in its tokens) that longer texts are truncated to."""

    def __init__(self, dimension: int = 64, fail_on: Sequence[str] = (),
                 window: int | None = None) -> None:
        self._inner = HashingEmbedder(dimension)
        self.window = window
        self.fail_on = list(fail_on)
        self.calls = 0
        self.texts = 0

    @property
    def identity(self) -> str:
        return self._inner.identity

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def max_input_tokens(self) -> int | None:
        return self.window

    @property
    def norm(self) -> VectorNorm:
        return self._inner.norm

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._inner.count_tokens(texts)

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        for text in texts:
            if any(marker in text for marker in self.fail_on):
                raise RuntimeError("embedding provider failed (simulated)")
        self.texts += len(texts)
        out: Vectors = self._inner.embed(texts).astype(np.float32)
        return out


class WordReranker:
    """A reranker (:class:`kbsync.embed.Reranker`) that scores a passage by how many of the
    query's words it holds, so a test knows which order reranking must give."""

    identity = "words-reranker-v1"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []  # (query, passages) of each call

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((query, len(passages)))
        wanted = set(query.lower().split())
        return [float(len(wanted & set(p.lower().split()))) for p in passages]
