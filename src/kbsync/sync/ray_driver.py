"""The Ray driver: the single-process sync's steps, with the reading spread over a cluster's
CPUs, the embedding on an actor pool (GPUs where the cluster has them) and the writes on
store actors.

It composes the steps of :mod:`kbsync.sync.steps` as the single-process driver does.
What is decided for a whole source stays in the syncing process, once per source: the
listing and the stat gate (:func:`~kbsync.sync.steps.gate`), :func:`~kbsync.sync.steps.decide`
(boilerplate, the bill, moves in key order), :func:`~kbsync.sync.steps.plan_batch`,
:func:`~kbsync.sync.steps.delete_gone` behind the mass-deletion guard and
:func:`~kbsync.sync.steps.finish_source` (the backfill), and the report. What grows with
the documents goes to Ray (:mod:`kbsync.sync.ray_pool`):

- observe: the documents the gate lets through go to reading tasks in key ranges; what
  they come to comes back through Ray's object store into the source's scratch file, a
  window of tasks at a time, so no process holds the corpus;
- plan: a batch at a time, here (the scratch file and the store's digests);
- embed: each batch's misses to an embedding actor, which loads the model once;
- apply: each batch to a store actor, in one transaction with its vectors; a batch that
  takes digests another batch embeds is applied after that one.

The report is a single-process sync's: the tallies that come back are merged in the order
the single driver counts them. A run is at least once: a killed worker's reading or
embedding is done again by Ray, a lost store actor ends the run (what it had not committed
is rolled back), and the next sync redoes only what was not applied.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from kbsync.core.plan import (
    Action,
    ChunkDraft,
    ChunkOps,
    DocumentPlan,
    DocumentVersion,
    Plan,
    StoredDocument,
)
from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.model import SourceItem
from kbsync.report import SyncResult
from kbsync.sources import Revisiting, Source
from kbsync.store import RecordStore
from kbsync.sync.chunker import Chunker
from kbsync.sync.context import Context, Decision
from kbsync.sync.embedding import count_reused, refuse_dimension_change
from kbsync.sync.failures import FailureMemory
from kbsync.sync.observe import Derive, ExtractorFor, count_unchanged
from kbsync.sync.options import SyncOptions
from kbsync.sync.ray_pool import READ_PER_TASK, Applied, Pool, RayCluster, Recipe
from kbsync.sync.reading import Job, Read
from kbsync.sync.run import finish_run, kept, observe_listed, sources_of_run, sync_source
from kbsync.sync.scratch import Scratch, Waiting
from kbsync.sync.steps import plan_batch
from kbsync.sync.tally import (
    REPORT_LIMIT,
    Clock,
    Counted,
    Progress,
    SourceTally,
    SyncReport,
    utc_now,
)
from kbsync.sync.vector_index import EmbeddedIndex

__all__ = ["sync_ray"]


def sync_ray(
    sources: Sequence[Source],
    store: RecordStore,
    embedder: Embedder,
    extractor_for: ExtractorFor,
    chunker: Chunker,
    options: SyncOptions | None = None,
    *,
    recipe: Recipe,
    cluster: RayCluster | None = None,
    progress: Progress | None = None,
) -> SyncResult:
    """Bring ``store`` in step with ``sources`` on Ray: the result of
    :func:`~kbsync.sync.single.sync_sources` on the same input, the work spread as the
    module says.

    ``recipe`` builds, in each of Ray's workers, the parts given here (the sources by
    name, the extractors, the chunker, the embedder, a store connection); ``cluster``
    says where Ray runs and with how many workers. ``options`` are those of a sync in
    one process but ``dry_run`` (a plan runs in one process), which it refuses. The
    vectors live in the store (an external vector store is not driven from Ray).
    """
    options = options or SyncOptions()
    if options.dry_run:
        raise ConfigError("a plan runs in one process: plan without --engine ray")
    refuse_dimension_change(store, embedder)
    report = SyncReport(dry_run=False, started=utc_now(), embedder=embedder.identity)
    index = EmbeddedIndex(store)
    # A first load defers what is cheaper to build after it (a PostgreSQL store's HNSW and
    # full-text indexes), as every driver does: built at index.end below.
    rewrite = index.begin(embedder.dimension)
    pool = Pool(cluster or RayCluster(), recipe, uuid.uuid4().hex[:12], progress)
    try:
        ctx = Context(store, pool.embedder(embedder), extractor_for, chunker, options,
                      progress=progress, index=index, clock=Clock(report))
        chosen = sources_of_run(store, sources, options)
        for one in chosen.each(report):
            rewrite |= sync_source(ctx, store, one, partial(_observe, pool=pool),
                                   partial(_write_batches, pool=pool))
    finally:
        pool.close()
    index.end(rewrite, embedder.identity, embedder.dimension)
    ctx.clock.lap("index")
    return finish_run(ctx, store, report, chosen)


def _observe(ctx: Context, source: Source, scratch: Scratch, derive: Derive,
             memory: FailureMemory, out: SourceTally, *, pool: Pool) -> None:
    """Gate every listed document here (:func:`~kbsync.sync.steps.gate`); those to read go
    to reading tasks, and what each comes to goes to ``scratch``.

    A crawl keeps the pages it fetched while listing, in this process: a source that
    revisits (a website) is read here rather than fetched again elsewhere.
    """
    total = scratch.listed_count() - count_unchanged(scratch, ctx.options.verify, out)
    readers = None if isinstance(source, Revisiting) \
        else _Readers(pool, source.name, kept(ctx, scratch, out))
    observe_listed(ctx, source, scratch, derive, memory, out, total, readers)
    ctx.clock.lap("read")


class _Readers:
    """Documents read by reading tasks, :data:`~kbsync.sync.ray_pool.READ_PER_TASK`
    consecutive keys each; ``done`` gets each task's :class:`~kbsync.sync.reading.Read` in
    the order the documents were given, with a window of tasks in flight."""

    def __init__(self, pool: Pool, source: str, done: Callable[[Read], None]) -> None:
        self._pool, self._source, self._done = pool, source, done
        self._jobs: list[Job] = []
        self._pending: deque[Any] = deque()

    def read(self, item: SourceItem, old: StoredDocument | None, derivation: str) -> None:
        if not self._jobs and not self._pending:
            self._pool.warm()
        self._jobs.append((item, old, derivation))
        if len(self._jobs) >= READ_PER_TASK:
            self._submit()

    def finish(self) -> None:
        self._submit()
        while self._pending:
            self._collect_one()

    def _submit(self) -> None:
        if not self._jobs:
            return
        self._pending.append(self._pool.read(self._source, self._jobs))
        self._jobs = []
        while len(self._pending) > self._pool.window:
            self._collect_one()

    def _collect_one(self) -> None:
        self._done(self._pool.get(self._pending.popleft()))


def _write_batches(ctx: Context, source: str, batches: Iterable[list[Waiting]],
                   scratch: Scratch, decision: Decision, out: SourceTally, *,
                   pool: Pool) -> None:
    """Plan each batch (of ``scratch``) here, embed and apply it on Ray; wait for the last."""
    flow = _Flow(ctx, pool, source, decision.skip, out)
    counted = Counted(ctx.progress, scratch.observed_count())
    for batch in batches:
        planned = SourceTally(source=source)
        the_plan, borrowed = plan_batch(ctx, source, batch, decision, planned, flow.assumed())
        flow.push(the_plan, borrowed, planned, counted.batch(len(batch)))
    flow.finish()


@dataclass(frozen=True, slots=True)
class _Applying:
    """A batch sent to a store actor: its number, the reference of its :class:`Applied`,
    and its progress (told when it is applied)."""

    number: int
    applied: Any
    progress: Progress | None


class _Flow:
    """Planned batches embedded and applied on Ray, their tallies merged into ``out`` in
    the order :class:`~kbsync.sync.batches.Pipeline` counts them in one process: a batch's
    plan, then the embedding and the writes of the batch before it.

    A batch planned while others are not yet applied takes their digests as embedded
    (:meth:`assumed`), and is applied after those whose digests it took, failing the
    documents that hold one whose embedding failed, as in one process.
    """

    def __init__(self, ctx: Context, pool: Pool, source: str, skip: frozenset[str],
                 out: SourceTally) -> None:
        self._ctx, self._pool, self._source, self._out = ctx, pool, source, out
        self._skip_set = skip
        self._skip: Any = None  # in Ray's object store once a batch goes there
        self._counts: deque[SourceTally | _Applying | Any] = deque()
        self._unapplied: dict[int, tuple[Any, frozenset[str]]] = {}
        self._last: tuple[SourceTally | Any, _Applying] | None = None
        self._number = 0
        self._window = 0  # batches applying before the oldest is waited for

    def assumed(self) -> set[str]:
        """The digests batches not yet applied embed."""
        return set().union(*(digests for _, digests in self._unapplied.values()))

    def push(self, the_plan: Plan, borrowed: frozenset[str], planned: SourceTally,
             progress: Progress | None) -> None:
        """Start embedding and applying a planned batch (``planned``: what its plan counted;
        ``progress``: the batch's, told when it is applied)."""
        pool, number = self._pool, self._number
        self._number += 1
        if self._skip is None:
            self._skip = pool.put(self._skip_set)
            self._window = pool.actors + 1
        sent = pool.put(the_plan)
        counted: SourceTally | Any
        if the_plan.to_embed:
            counted, vectors = pool.embed(number, pool.put(_misses_only(the_plan)))
            count_reused(the_plan, planned)  # counts only: where they are added is moot
        else:
            counted, vectors = SourceTally(source=self._source), None
            count_reused(the_plan, counted)
        after = [applied for applied, digests in self._unapplied.values()
                 if not digests.isdisjoint(borrowed)]
        applying = _Applying(number, pool.apply(number, sent, vectors, self._skip, borrowed,
                                                after), progress)
        self._unapplied[number] = (applying.applied, frozenset(the_plan.to_embed))
        self._counts.append(planned)
        if self._last is not None:
            self._counts.extend(self._last)
        self._last = (counted, applying)
        self._merge(keep=self._window)

    def finish(self) -> None:
        """Wait for every batch, merging what each counted."""
        if self._last is not None:
            self._counts.extend(self._last)
            self._last = None
        self._merge(keep=0)

    def _merge(self, keep: int) -> None:
        """Merge the tallies at the front that are ready, waiting for them while more than
        ``keep`` batches are not applied."""
        while self._counts:
            front = self._counts[0]
            must = len(self._unapplied) > keep
            if isinstance(front, SourceTally):
                _absorb(self._out, front)
            elif isinstance(front, _Applying):
                if not must and not self._pool.ready(front.applied):
                    return
                applied: Applied = self._pool.get(front.applied)
                _absorb(self._out, applied.tally)
                del self._unapplied[front.number]
                self._ctx.clock.lap("apply")
                if front.progress is not None:
                    front.progress("apply", 1, 1)
            else:
                if not must and not self._pool.ready(front):
                    return
                _absorb(self._out, self._pool.get(front))
                # Waiting for a batch's vectors: the embed stage, as in one process.
                self._ctx.clock.lap("embed")
            self._counts.popleft()


def _misses_only(the_plan: Plan) -> Plan:
    """The plan's chunks to embed as the plan of one document holding each of them once:
    all an embedding actor needs of a batch (half its bytes, a fifth of its unpickling).

    Embedding it counts no reuse (its one document adds exactly the chunks to embed):
    the batch's own plan counts that.
    """
    wanted = set(the_plan.to_embed)
    chunks: dict[str, ChunkDraft] = {}
    for doc in the_plan.documents:
        for chunk in doc.version.chunks if doc.version is not None else ():
            if chunk.digest in wanted:
                chunks.setdefault(chunk.digest, chunk)
    version = DocumentVersion(key="", locator="", media_type="", stat=None, bytes_hash="",
                              text_hash="", derivation="", title=None, metadata="{}", text="",
                              chunks=tuple(chunks.values()))
    holder = DocumentPlan("", Action.NEW, version=version, ops=ChunkOps(added=len(chunks)))
    return Plan(the_plan.source, (holder,), the_plan.to_embed)


def _absorb(out: SourceTally, part: SourceTally) -> None:
    """Add ``part`` to ``out`` as if its counts had been made in ``out``: the unreadable
    documents the next sync remembers too, as many as a report keeps."""
    out.merge(part)
    for key, failure in part.unreadable.items():
        if len(out.unreadable) < REPORT_LIMIT:
            out.unreadable[key] = failure
