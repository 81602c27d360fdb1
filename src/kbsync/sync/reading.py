"""Read, extract, hash and chunk documents in a pool of processes, the writer staying one.

Reading is where a first sync spends its CPU (extraction, normalizing, chunking), and
it needs nothing but the document: so it can run in worker processes, each handing
back the document's :class:`~kbsync.plan.Observation` with what it counted. The
workers are forked, so the source, the extractors and the chunker are inherited
rather than pickled; only items and observations cross. At most a few documents per
worker are in flight, so memory does not grow with the source.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from kbsync.chunking import ChunkShape, shape_of
from kbsync.model import Chunk, SourceItem
from kbsync.plan import Observation, StoredDocument
from kbsync.sources import Source
from kbsync.sync.chunker import Chunker
from kbsync.sync.observe import ExtractorFor, observe
from kbsync.sync.tally import SourceTally

__all__ = ["POOL_MIN_DOCUMENTS", "Read", "Readers", "read_workers"]

POOL_MIN_DOCUMENTS = 64
"""Fewer documents to read than this are read in the sync's own process: starting
workers would cost more than it saves."""
_IN_FLIGHT = 8  # documents per worker submitted ahead of the one being collected


def read_workers(setting: int) -> int:
    """How many processes read: ``setting``, or with 0 one per core (at most 8)."""
    return setting if setting > 0 else min(8, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class Read:
    """One document read: what it came to, what reading it counted, the shapes of its chunks."""

    observation: Observation
    tally: SourceTally
    shapes: Counter[ChunkShape]


class Readers:
    """Documents read by ``workers`` forked processes, handed back in the order asked."""

    def __init__(self, workers: int, source: Source, extractor_for: ExtractorFor,
                 chunker: Chunker) -> None:
        self._pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("fork"),
            initializer=_start_worker, initargs=(source, extractor_for, chunker))
        self._window = workers * _IN_FLIGHT
        self._pending: deque[tuple[Callable[[Read], None], Future[Read]]] = deque()

    def read(self, item: SourceItem, old: StoredDocument | None, derivation: str,
             done: Callable[[Read], None]) -> None:
        """Read ``item``; ``done`` gets the result, in the order documents were given."""
        self._pending.append((done, self._pool.submit(_read, item, old, derivation)))
        while len(self._pending) > self._window:
            self._collect_one()

    def finish(self) -> None:
        """Wait for every document given, handing each to its ``done``."""
        while self._pending:
            self._collect_one()

    def close(self) -> None:
        """Stop the workers; documents not yet collected are dropped."""
        for _, future in self._pending:
            future.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Readers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _collect_one(self) -> None:
        done, future = self._pending.popleft()
        done(future.result())


# What a worker process reads with, inherited from the sync when it was forked.
_WORKER: tuple[Source, ExtractorFor, Chunker] | None = None


def _start_worker(source: Source, extractor_for: ExtractorFor, chunker: Chunker) -> None:
    global _WORKER
    _WORKER = (source, extractor_for, chunker)
    # Ctrl-C reaches the whole process group: the sync stops its workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read(item: SourceItem, old: StoredDocument | None, derivation: str) -> Read:
    assert _WORKER is not None
    source, extractor_for, chunker = _WORKER
    extractor = extractor_for(item.media_type)
    assert extractor is not None
    tally = SourceTally(source=source.name)
    shapes: Counter[ChunkShape] = Counter()

    def count(chunk: Chunk) -> None:
        shapes[shape_of(chunk)] += 1

    observation = observe(source, item, old, extractor, derivation, chunker, tally, count)
    return Read(observation, tally, shapes)
