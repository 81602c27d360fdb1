"""Read, extract, hash and chunk documents in a pool of processes, the writer staying one.

Reading is where a first sync spends its CPU (extraction, normalizing, chunking), and
it needs nothing but the document: so it can run in worker processes. The workers are
forked, so the source, the extractors and the chunker are inherited rather than
pickled. Documents go to them a few at a time, and each comes back packed for the
scratch file (:func:`~kbsync.sync.scratch.pack`): the sync's own process, which also
files every result, only writes bytes, so the workers keep the cores busy. At most a
few tasks per worker are in flight, so memory does not grow with the source.

A worker dies with the sync (:func:`_die_with`): one killed outright must leave no
reader behind, holding its output pipes and the files it inherited open.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from kbsync.core.chunking import ChunkShape
from kbsync.core.plan import StoredDocument, Unchanged
from kbsync.model import SourceItem
from kbsync.sources import Source
from kbsync.sync.chunker import Chunker
from kbsync.sync.context import ReadJob
from kbsync.sync.observe import ExtractorFor
from kbsync.sync.scratch import Packed, pack
from kbsync.sync.steps import observe_batch
from kbsync.sync.tally import SourceTally

__all__ = ["POOL_MIN_DOCUMENTS", "DocumentReader", "Job", "Read", "Readers", "read_jobs",
           "read_workers"]

POOL_MIN_DOCUMENTS = 64
"""Fewer documents to read than this are read in the sync's own process: starting
workers would cost more than it saves."""
_PER_TASK = 8  # documents a task reads: a task's round trip costs about a document's read
_IN_FLIGHT = 4  # tasks per worker submitted ahead of the one being collected

Job = tuple[SourceItem, StoredDocument | None, str]
"""A document to read: its item, its stored version and the derivation it is read with."""


def read_workers(setting: int) -> int:
    """How many processes read: ``setting``, or with 0 one per core (at most 8)."""
    return setting if setting > 0 else min(8, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class Read:
    """A task's documents read, in the order given: each one unchanged or packed for the
    scratch file; with what reading them counted and the shapes of their chunks."""

    observations: list[Unchanged | Packed]
    tally: SourceTally
    shapes: Counter[ChunkShape]


class DocumentReader(Protocol):
    """Where a driver sends the documents the stat gate lets through to be read outside its
    own process: a pool of processes (:class:`Readers`), Ray's tasks."""

    def read(self, item: SourceItem, old: StoredDocument | None, derivation: str) -> None:
        """Read ``item`` (made with ``derivation``; ``old`` is its stored version)."""
        ...

    def finish(self) -> None:
        """Wait until every document given is read and handed on."""
        ...


class Readers:
    """Documents read by ``workers`` forked processes; ``done`` gets each task's
    :class:`Read`, in the order the documents were given."""

    def __init__(self, workers: int, source: Source, extractor_for: ExtractorFor,
                 chunker: Chunker, done: Callable[[Read], None]) -> None:
        self._pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("fork"),
            initializer=_start_worker, initargs=(source, extractor_for, chunker, os.getpid()))
        self._window = workers * _IN_FLIGHT
        self._done = done
        self._jobs: list[Job] = []
        self._pending: deque[Future[Read]] = deque()

    def read(self, item: SourceItem, old: StoredDocument | None, derivation: str) -> None:
        """Read ``item`` (made with ``derivation``; ``old`` is its stored version)."""
        self._jobs.append((item, old, derivation))
        if len(self._jobs) >= _PER_TASK:
            self._submit()

    def finish(self) -> None:
        """Wait for every document given, handing each task's result to ``done``."""
        self._submit()
        while self._pending:
            self._collect_one()

    def close(self) -> None:
        """Stop the workers; documents not yet collected are dropped."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        self._jobs.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Readers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _submit(self) -> None:
        if not self._jobs:
            return
        self._pending.append(self._pool.submit(_read, self._jobs))
        self._jobs = []
        while len(self._pending) > self._window:
            self._collect_one()

    def _collect_one(self) -> None:
        self._done(self._pending.popleft().result())


# What a worker process reads with, inherited from the sync when it was forked.
_WORKER: tuple[Source, ExtractorFor, Chunker] | None = None


def _start_worker(source: Source, extractor_for: ExtractorFor, chunker: Chunker,
                  sync: int) -> None:
    global _WORKER
    _WORKER = (source, extractor_for, chunker)
    # Ctrl-C reaches the whole process group: the sync stops its workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(sync)


_PR_SET_PDEATHSIG = 1
_WATCH_SECONDS = 0.2


def _die_with(sync: int) -> None:
    """End this worker as soon as the process ``sync`` (its parent) is gone.

    A sync killed outright (kill -9, the OOM killer) cannot stop its workers, which
    would wait for work forever, holding the pipes of its output and every file it had
    open, its writer lock among them. Linux ends them with the parent (a parent-death
    signal); elsewhere a thread watches for the parent to change.
    """
    if sys.platform == "linux":
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != sync:  # it died before the signal was asked for
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == sync:
            time.sleep(_WATCH_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="kbsync-reader-watch", daemon=True).start()


def _read(jobs: list[Job]) -> Read:
    assert _WORKER is not None
    return read_jobs(*_WORKER, jobs)


def read_jobs(source: Source, extractor_for: ExtractorFor, chunker: Chunker,
              jobs: Sequence[Job]) -> Read:
    """Gates 2 and 3 of each document of ``jobs`` (:func:`~kbsync.sync.steps.observe_batch`),
    in any process: what a reading process, or a task of another driver, comes back with."""
    done = observe_batch(source, (ReadJob(*job) for job in jobs), extractor_for, chunker)
    return Read([seen if isinstance(seen, Unchanged) else pack(seen, old)
                 for seen, old in done.observations], done.tally, done.shapes)
