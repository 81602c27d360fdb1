"""A worker of a parallel sync: the work queue it claims batches of documents from, and the
steps (:mod:`kbsync.sync.steps`) it runs on each, inside the transaction of its claim.

A run's documents are claimed twice. First to be observed (read, extracted, chunked:
:func:`~kbsync.sync.steps.observe_batch`), each observation waiting in the queue with
its :class:`~kbsync.sync.scratch.Facts`; then, once the coordinator has decided on their
source (:func:`~kbsync.sync.steps.decide`: boilerplate, moves, the bill), to be planned,
embedded and applied (:func:`~kbsync.sync.steps.plan_batch`,
:func:`~kbsync.sync.steps.embed_batch`, :func:`~kbsync.sync.steps.apply_batch`). Each
batch's tally goes to the queue with its rows' change, in one transaction.

A worker that dies loses nothing: the server rolls its transaction back and the batch
goes back to the queue.
"""

from __future__ import annotations

import contextlib
import pickle
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from kbsync.core.plan import StoredDocument, Unchanged
from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.model import SourceItem, SourceStat, Validators
from kbsync.sources import Source
from kbsync.store import RecordStore
from kbsync.sync.chunker import Chunker
from kbsync.sync.context import Context, Decision, ReadJob, shapes_data
from kbsync.sync.observe import ExtractorFor, derivation
from kbsync.sync.options import SyncOptions
from kbsync.sync.scratch import Waiting, facts_of
from kbsync.sync.steps import apply_batch, embed_batch, observe_batch, plan_batch
from kbsync.sync.tally import Clock, Progress, SourceTally, SyncReport, utc_now
from kbsync.sync.vector_index import EmbeddedIndex, VectorIndex

__all__ = ["CLAIM_BATCH", "ClaimedDocument", "WorkQueue", "drain", "job_data", "job_item",
           "worker_context"]

CLAIM_BATCH = 128
"""Documents a worker claims at once: one claim, one transaction and one embedding pass per
batch, where one per document made a worker wait on the server most of its time."""
POLL_SECONDS = 0.05
"""How often a worker with nothing to claim looks again while the run goes on (documents
claimed by others, or waiting for the coordinator's decision)."""

READ, APPLY = "todo", "ready"
"""The queue states of documents to observe and of documents to apply."""


class ClaimedDocument(Protocol):
    """A document of a run that this worker holds until its transaction ends."""

    @property
    def run(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def item(self) -> Mapping[str, Any]: ...

    @property
    def observation(self) -> bytes | None: ...


@runtime_checkable
class WorkQueue(RecordStore, Protocol):
    """A record store that also holds the work queue of parallel runs (PostgreSQL)."""

    def enqueue(self, run: str, source: str, items: Sequence[tuple[str, Mapping[str, Any]]],
                state: str = "todo") -> int: ...

    def enqueue_observed(self, run: str, source: str,
                         rows: Sequence[tuple[str, bytes, Mapping[str, Any]]]) -> None: ...

    def begin_run(self, run: str) -> None: ...

    def coordinator_alive(self, run: str) -> bool: ...

    def claim_batch(self, run: str, limit: int,
                    state: str = "todo") -> AbstractContextManager[Sequence[ClaimedDocument]]: ...

    def observed_batch(self, run: str, source: str,
                       rows: Sequence[tuple[str, bytes, Mapping[str, Any]]],
                       result: Mapping[str, Any], first_key: str,
                       unchanged: Sequence[str] = ()) -> None: ...

    def finish_batch(self, run: str, source: str, keys: Sequence[str],
                     result: Mapping[str, Any], first_key: str = "") -> None: ...

    def facts(self, run: str, source: str) -> Iterator[tuple[str, dict[str, Any]]]: ...

    def observations(self, run: str, source: str) -> Iterator[bytes]: ...

    def release(self, run: str, source: str, decision: Mapping[str, Any],
                notes: Mapping[str, Mapping[str, Any]]) -> None: ...

    def hold_digests(self, digests: Collection[str]) -> None: ...

    def decision(self, run: str, source: str) -> dict[str, Any]: ...

    def stored_many(self, source: str, keys: Sequence[str]) -> dict[str, StoredDocument]: ...

    def results(self, run: str, source: str) -> Iterator[dict[str, Any]]: ...

    def abandon_runs(self) -> int: ...

    def open_runs(self) -> list[str]: ...

    def pending(self, run: str) -> int: ...

    def waiting(self, run: str) -> dict[str, int]: ...

    def end_run(self, run: str) -> None: ...

    def prepare_vectors(self, dimension: int) -> None: ...

    def finish_vectors(self, dimension: int) -> None: ...


def worker_context(store: WorkQueue, embedder: Embedder, extractor_for: ExtractorFor,
                   chunker: Chunker, options: SyncOptions | None = None,
                   index: VectorIndex | None = None) -> Context:
    """The context of a worker process's steps (its store, its vector index)."""
    report = SyncReport(dry_run=False, started=utc_now(), embedder=embedder.identity)
    return Context(store, embedder, extractor_for, chunker, options or SyncOptions(), None,
                   index or EmbeddedIndex(store), Clock(report))


def drain(run: str, sources: Sequence[Source], ctx: Context, *, state: str | None = None,
          progress: Progress | None = None, batch: int | None = None) -> int:
    """Claim and process batches of ``run`` (only those in ``state``, when given: the
    coordinator's way through the phases of its run); how many documents.

    Without ``state``, documents to observe first, then documents to apply; while others
    hold the rest, or the coordinator has still to decide on it, it waits, until the
    run has nothing left, or its coordinator is gone. With ``state``, until no document
    is left in that state. ``batch``: documents a claim takes (:data:`CLAIM_BATCH`).
    """
    batch = batch or CLAIM_BATCH
    store = ctx.store
    assert isinstance(store, WorkQueue)
    by_name = {s.name: s for s in sources}
    decisions: dict[str, Decision] = {}
    done = 0
    while True:
        for phase in (READ, APPLY) if state is None else (state,):
            n = _claim(run, phase, store, by_name, ctx, decisions, batch)
            if n:
                done += n
                if progress is not None:
                    progress("documents", done, 0)
                break
        else:
            left = store.waiting(run)
            if state is not None:
                if not left.get(state):
                    return done
            elif not left or not store.coordinator_alive(run):
                return done
            time.sleep(POLL_SECONDS)


def _claim(run: str, state: str, store: WorkQueue, by_name: Mapping[str, Source],
           ctx: Context, decisions: dict[str, Decision], batch: int) -> int:
    """Claim one batch in ``state`` and process it; how many documents (0: none left
    unclaimed)."""
    with ctx.index.deferring() if state == APPLY else contextlib.nullcontext(), \
            store.claim_batch(run, batch, state) as jobs:
        if not jobs:
            return 0
        name = jobs[0].source
        source = by_name.get(name)
        if source is None:
            raise ConfigError(f"this worker has no source named {name!r}: workers "
                              "must use the same kbsync.toml as the sync they serve")
        if state == READ:
            _observe(ctx, run, source, jobs)
        else:
            if name not in decisions:
                decisions[name] = Decision.from_dict(store.decision(run, name))
            _apply(ctx, run, source, jobs, decisions[name])
        return len(jobs)


def _observe(ctx: Context, run: str, source: Source, jobs: Sequence[ClaimedDocument]) -> None:
    """A claimed batch read (:func:`~kbsync.sync.steps.observe_batch`); each observation
    waits in the queue with its facts, for the coordinator's decision."""
    store = ctx.store
    assert isinstance(store, WorkQueue)
    olds = store.stored_many(source.name, [j.key for j in jobs])
    reads = []
    for job in jobs:
        item = job_item(job.key, job.item)
        made_with = job.item["derivation"]
        extractor = ctx.extractor_for(item.media_type)
        if extractor is None or derivation(ctx.chunker, extractor.identity) != made_with \
                or job.item["embedder"] != ctx.embedder.identity:
            raise ConfigError("this worker's chunker, extractors or embedder differ from "
                              "those of the sync it serves: use the same kbsync.toml and "
                              "kbsync version")
        reads.append(ReadJob(item, olds.get(job.key), made_with))
    seen = observe_batch(source, reads, ctx.extractor_for, ctx.chunker)
    # Without its chunk digests, which the plan reads again: the row is smaller.
    rows = [(o.key, pickle.dumps((o, old if old is None else replace(old, chunk_digests=())),
                                 protocol=pickle.HIGHEST_PROTOCOL),
             facts_of(o, old).to_dict())
            for o, old in seen.observations if not isinstance(o, Unchanged)]
    store.observed_batch(run, source.name, rows,
                         {**seen.tally.to_dict(), "shapes": shapes_data(seen.shapes)},
                         jobs[0].key,
                         [o.key for o, _ in seen.observations if isinstance(o, Unchanged)])


def _apply(ctx: Context, run: str, source: Source, jobs: Sequence[ClaimedDocument],
           decision: Decision) -> None:
    """A claimed batch of observations planned, embedded and applied, with the origins of
    the moves the coordinator decided."""
    store = ctx.store
    assert isinstance(store, WorkQueue)
    # A chunk new to several documents of the run is embedded by one batch: the others
    # wait for it, then find it cached (as one process, batch after batch, does).
    store.hold_digests({d for j in jobs for d in j.item.get("shares", ())})
    named = [str(j.item["origin"]) for j in jobs if j.item.get("origin")]
    origins = store.stored_many(source.name, named) if named else {}
    batch = []
    for job in jobs:
        assert job.observation is not None
        observation, old = pickle.loads(job.observation)
        origin = job.item.get("origin")
        batch.append(Waiting(observation, old, None if origin is None else origins[origin]))
    out = SourceTally(source=source.name)
    the_plan, _ = plan_batch(ctx, source.name, batch, decision, out)
    vectors, failed = embed_batch(ctx, the_plan, out, None)
    apply_batch(ctx, the_plan, vectors, failed, decision.skip, out, None)
    store.finish_batch(run, source.name, [j.key for j in jobs], out.to_dict(), jobs[0].key)


def job_data(item: SourceItem, derivation: str, embedder: str) -> dict[str, Any]:
    """A queued document to read: its listed item, and what it is to be read with."""
    stat = item.stat
    validators = item.validators
    return {
        "locator": item.locator, "media_type": item.media_type,
        "stat": None if stat is None else [stat.size, stat.mtime_ns, stat.inode, stat.racy],
        "validators": None if validators is None
        else [validators.etag, validators.last_modified],
        "not_modified": item.not_modified, "derivation": derivation, "embedder": embedder,
        "metadata": [list(pair) for pair in item.metadata],
        "renamed_from": item.renamed_from,
    }


def job_item(key: str, data: Mapping[str, Any]) -> SourceItem:
    """The listed item :func:`job_data` queued."""
    stat, validators = data["stat"], data["validators"]
    return SourceItem(key=key, locator=data["locator"], media_type=data["media_type"],
                      stat=None if stat is None else SourceStat(*stat),
                      validators=None if validators is None else Validators(*validators),
                      not_modified=data["not_modified"],
                      metadata=tuple((str(k), str(v)) for k, v in data.get("metadata", ())),
                      renamed_from=data.get("renamed_from"))
