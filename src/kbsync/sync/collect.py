"""Vectors on their way from the embedder to the embedding cache, gathered in the sync's
thread (:mod:`kbsync.sync.embedding` computes them).

They are committed at least once per second of embedding (``BatchLimits.cache_seconds``),
once they reach :data:`CACHE_BYTES`, and whenever embedding stops, an interruption
included: a sync that is stopped loses none of them, and one that is killed at most that
second's work. Committing every batch of 64 instead made a fast embedder wait on a disk
sync per batch. A plan's last vectors can instead be held for the transaction that
applies the plan: with a fast embedder that is one commit per batch of documents
instead of two, and each commit rewrites the pages of the digest indexes it touches,
whose number grows with the store.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kbsync.store import EmbeddingCache
from kbsync.sync.options import CACHE_SECONDS
from kbsync.sync.tally import Progress, SourceTally

__all__ = ["CACHE_BYTES", "CacheWriter", "Collector", "Done", "Vectors", "save_held"]

Vectors = dict[str, npt.NDArray[np.float32]]

CACHE_BYTES = 2 * 2**20
"""Bytes of vectors held for the cache at most: the bound that holds with a fast embedder,
whatever its dimension (512 vectors of 1,024 dimensions), so the memory a sync holds
does not depend on how many vectors the machine computes in a second."""


@dataclass(slots=True)
class Done:
    """One model batch embedded: its vectors, the digests that failed and why, and how many
    of the plan's texts are done with it."""

    vectors: Vectors
    failed: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    done: int = 0


def save_held(cache: EmbeddingCache, embedder: str, held: Mapping[str, npt.NDArray[np.float32]],
              ) -> None:
    """Commit held vectors (:func:`~kbsync.sync.embedding.embed_plan`) whose plan could not
    be applied, so that no computed embedding is lost; quietly, since the store may be
    what failed."""
    with contextlib.suppress(Exception):
        cache.put_vectors(embedder, held)


class CacheWriter:
    """Vectors on their way into the embedding cache, committed together every
    ``seconds`` or once they reach :data:`CACHE_BYTES` (and by a last :meth:`commit`);
    counted once committed."""

    def __init__(self, cache: EmbeddingCache, embedder: str, out: SourceTally,
                 seconds: float = CACHE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._cache, self._embedder, self._out = cache, embedder, out
        self._seconds, self._clock = seconds, clock
        self._pending: Vectors = {}
        self._bytes = 0
        self._since = clock()

    def add(self, vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        self._pending.update(vectors)
        self._bytes += sum(vector.nbytes for vector in vectors.values())
        if self._bytes >= CACHE_BYTES or self._clock() - self._since >= self._seconds:
            self.commit()

    def commit(self) -> None:
        if self._pending:
            self._cache.put_vectors(self._embedder, self.take())
        self._since = self._clock()

    def take(self) -> Vectors:
        """The vectors not yet committed, counted, for the caller to write."""
        pending, self._pending, self._bytes = self._pending, {}, 0
        self._out.embeddings_computed += len(pending)
        return pending


class Collector:
    """What the model batches of one plan come to, gathered in the sync's thread:
    vectors to the ``writer`` (the cache) or counted, failures and warnings to ``out``."""

    def __init__(self, out: SourceTally, progress: Progress | None, total: int,
                 writer: CacheWriter | None, keep: bool) -> None:
        self._out, self._progress, self._total = out, progress, total
        self._writer, self._keep = writer, keep
        self.vectors: Vectors = {}
        self.failed: set[str] = set()

    def add(self, done: Done) -> None:
        self.failed |= done.failed
        self._out.warnings.extend(done.warnings)
        if self._writer is not None:
            self._writer.add(done.vectors)
        else:
            self._out.embeddings_computed += len(done.vectors)
        if self._keep or self._writer is None:
            self.vectors.update(done.vectors)
        if self._progress is not None:
            self._progress("embed", done.done, self._total)

    def all(self, batches: Iterable[Done]) -> None:
        """Add every batch; an interruption (Ctrl-C, SIGTERM) commits what was computed."""
        try:
            for done in batches:
                self.add(done)
        except BaseException:
            if self._writer is not None:
                self._writer.commit()
            raise

    def finish(self, hold: bool) -> tuple[Vectors, set[str]]:
        """The vectors and failures, the vectors not yet committed handed back with
        ``hold``, else committed."""
        if self._writer is not None:
            if hold:
                return self._writer.take(), self.failed
            self._writer.commit()
        return self.vectors, self.failed
