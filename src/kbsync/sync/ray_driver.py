"""The Ray driver: the single-process sync's steps, with the reading spread over a cluster's
CPUs, the embedding on an actor pool (GPUs where the cluster has them) and the writes on
store actors.

What is decided for a whole source stays in the syncing process, once per source and by
the same step functions as in one process (:mod:`kbsync.sync.single`): the listing and
the stat gate, what failed before, boilerplate, the bill, moves in key order, deletions
and the mass-deletion guard, the backfill, the report. What grows with the documents goes
to Ray (:mod:`kbsync.sync.ray_pool`):

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
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kbsync.core.plan import (
    Action,
    ChunkDraft,
    ChunkOps,
    DocumentPlan,
    DocumentVersion,
    Failed,
    Plan,
    StoredDocument,
    Unchanged,
)
from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.model import ItemError, SourceItem
from kbsync.report import SyncResult
from kbsync.sources import Revisiting, Source
from kbsync.store import RecordStore
from kbsync.sync.batches import Batch, Run, plan_batch
from kbsync.sync.bill import confirm_bill
from kbsync.sync.chunker import Chunker
from kbsync.sync.embedding import (
    backfill,
    count_reused,
    embedded_meta_name,
    refuse_dimension_change,
)
from kbsync.sync.failures import FailureMemory
from kbsync.sync.listing import keep_schedules, list_source
from kbsync.sync.observe import Derive, ExtractorFor, count_unchanged, deriver
from kbsync.sync.options import SyncOptions
from kbsync.sync.ray_pool import READ_PER_TASK, Applied, Pool, RayCluster, Recipe
from kbsync.sync.reading import Job, Read
from kbsync.sync.removed import RemovedSource, forget_released, keep_removed, sources_to_sync
from kbsync.sync.scratch import Scratch
from kbsync.sync.single import (
    delete_vanished,
    gate,
    record_interrupted,
    sigterm_as_interrupt,
    source_boilerplate,
)
from kbsync.sync.tally import REPORT_LIMIT, Clock, Progress, SourceTally, SyncReport, utc_now
from kbsync.sync.vector_index import EmbeddedIndex
from kbsync.sync.work import WorkQueue

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
    clock = Clock(report)
    if isinstance(store, WorkQueue):
        # A first load defers the vector index to its end, as parallel workers do: many
        # writers growing one HNSW graph insert by insert cost several times its build.
        store.prepare_vectors(embedder.dimension)
    pool = Pool(cluster or RayCluster(), recipe, uuid.uuid4().hex[:12])
    try:
        run = Run(store, pool.embedder(embedder), extractor_for, chunker, options,
                  progress=progress, index=EmbeddedIndex(store), clock=clock, tally=Counter())
        sources, removed, released = sources_to_sync(store, sources, options.allow_mass_delete,
                                                     options.only)
        for source in [*sources, *removed]:
            tally = SourceTally(source=source.name)
            report.sources.append(tally)
            if isinstance(source, RemovedSource):
                if source.name not in released:
                    keep_removed(source, tally)
                    continue
                tally.warnings.append("no longer configured: its documents are deleted")
            _sync_source(run, pool, store, source,
                         options.allow_mass_delete or isinstance(source, RemovedSource), tally)
    finally:
        pool.close()
    if isinstance(store, WorkQueue):
        store.finish_vectors(embedder.dimension)
        clock.lap("index")
    report.diagnostics = chunker.text_chunker().diagnose_tally(run.tally)
    report.finished = utc_now()
    result = report.result()
    store.set_meta("chunker", chunker.fingerprint)
    store.set_meta("embedder", embedder.identity)
    forget_released(store, released | {s.name for s in sources})
    store.record_run(result.started, result.finished, result.to_dict())
    return result


def _sync_source(run: Run, pool: Pool, store: RecordStore, source: Source,
                 allow_mass_delete: bool, out: SourceTally) -> None:
    """:func:`_sync_source_steps`, stopped by SIGTERM as by Ctrl-C; a run that stops there
    is recorded as interrupted before the error goes on, as in one process."""
    try:
        with sigterm_as_interrupt():
            _sync_source_steps(run, pool, store, source, allow_mass_delete, out)
    except BaseException:
        record_interrupted(store, run.clock.report)
        raise


def _sync_source_steps(run: Run, pool: Pool, store: RecordStore, source: Source,
                       allow_mass_delete: bool, out: SourceTally) -> None:
    """The steps of :func:`kbsync.sync.single._sync_source_steps` (a sync, not a plan), with
    the reading, the embedding and the writes of the batches on Ray."""
    memory = FailureMemory(store, source.name)
    with Scratch(run.options.scratch_dir) as scratch:
        derive = deriver(run.extractor_for, run.chunker)
        listed = list_source(source, store, derive, run.options.verify, scratch, out,
                             due=run.options.due and not run.options.verify,
                             accept_root=run.options.accept_root)
        run.clock.lap("list")
        stored = scratch.stored_count()
        _observe(run, pool, source, scratch, derive, memory, out)
        vanished = scratch.vanish() if listed.complete else 0
        shared = source_boilerplate(run, source.name, scratch, vanished, out)
        skip = frozenset() if run.options.index_boilerplate else shared
        same_boilerplate = store.boilerplate(source.name) == skip
        embedded = (not run.options.verify and same_boilerplate
                    and store.get_meta(embedded_meta_name(source.name)) == run.embedder.identity)
        limits = run.options.batch
        store.set_boilerplate(source.name, skip)
        limit = run.options.confirm_above_tokens
        if limit is not None:
            confirm_bill(store, run.embedder, source.name, scratch, skip, limit,
                         embedded=embedded, setting=run.options.bound_setting)
        _write_batches(run, pool, source.name,
                       scratch.batches(limits.documents, limits.bytes, limits.first),
                       scratch, skip, shared, out)
        delete_vanished(run, source.name, scratch, stored, allow_mass_delete, out)
        memory.settle(out)
        keep_schedules(store, source.name, listed.revisited, out)
        if listed.complete:  # else failures of unlisted documents would be forgotten
            memory.save(store)
    if not embedded and backfill(source.name, store, run.embedder, out):
        store.set_meta(embedded_meta_name(source.name), run.embedder.identity)
    run.clock.lap("apply")


def _observe(run: Run, pool: Pool, source: Source, scratch: Scratch, derive: Derive,
             memory: FailureMemory, out: SourceTally) -> None:
    """Gate every listed document here; those to read go to reading tasks, and what each
    comes to goes to ``scratch`` (as :func:`kbsync.sync.single._observe_source` does with
    its pool of processes).

    A crawl keeps the pages it fetched while listing, in this process: a source that
    revisits (a website) is read here rather than fetched again elsewhere.
    """
    total = scratch.listed_count() - count_unchanged(scratch, run.options.verify, out)

    def done(read: Read) -> None:
        out.merge(read.tally)
        run.tally.update(read.shapes)
        for seen in read.observations:
            if isinstance(seen, Unchanged):
                out.documents[str(Action.UNCHANGED)] += 1
            else:
                scratch.keep(seen)

    readers = None if isinstance(source, Revisiting) else _Readers(pool, source.name, done)
    for n, (entry, old) in enumerate(scratch.listing(skip_unchanged=not run.options.verify), 1):
        if isinstance(entry, ItemError):
            scratch.observe(Failed(entry.key, entry.message, missing=entry.missing), old)
        else:
            gate(run, source, entry, old, derive, memory, out, scratch, readers)
        if run.progress is not None:
            run.progress("read", n, total)
    if readers is not None:
        readers.finish()
    run.clock.lap("read")


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


def _write_batches(run: Run, pool: Pool, source: str, batches: Iterable[Batch],
                   scratch: Scratch, skip: frozenset[str], shared: frozenset[str],
                   out: SourceTally) -> None:
    """Plan each batch here, embed and apply it on Ray; wait for the last."""
    flow = _Flow(run, pool, source, skip, out)
    for batch in batches:
        planned = SourceTally(source=source)
        the_plan, borrowed = plan_batch(run, source, batch, scratch, skip, shared, planned,
                                        flow.assumed())
        flow.push(the_plan, borrowed, planned)
    flow.finish()


@dataclass(frozen=True, slots=True)
class _Applying:
    """A batch sent to a store actor: its number and the reference of its :class:`Applied`."""

    number: int
    applied: Any


class _Flow:
    """Planned batches embedded and applied on Ray, their tallies merged into ``out`` in
    the order :class:`~kbsync.sync.batches.Pipeline` counts them in one process: a batch's
    plan, then the embedding and the writes of the batch before it.

    A batch planned while others are not yet applied takes their digests as embedded
    (:meth:`assumed`), and is applied after those whose digests it took, failing the
    documents that hold one whose embedding failed, as in one process.
    """

    def __init__(self, run: Run, pool: Pool, source: str, skip: frozenset[str],
                 out: SourceTally) -> None:
        self._run, self._pool, self._source, self._out = run, pool, source, out
        self._skip = pool.put(skip)
        self._counts: deque[SourceTally | _Applying | Any] = deque()
        self._unapplied: dict[int, tuple[Any, frozenset[str]]] = {}
        self._last: tuple[SourceTally | Any, _Applying] | None = None
        self._number = 0
        self._planned = 0
        self._applied = 0
        self._window = pool.actors + 1

    def assumed(self) -> set[str]:
        """The digests batches not yet applied embed."""
        return set().union(*(digests for _, digests in self._unapplied.values()))

    def push(self, the_plan: Plan, borrowed: frozenset[str], planned: SourceTally) -> None:
        """Start embedding and applying a planned batch (``planned``: what its plan counted)."""
        pool, number = self._pool, self._number
        self._number += 1
        self._planned += len(the_plan.documents)
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
                                                after))
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
                self._applied += applied.tally.documents_applied
                self._run.clock.lap("apply")
                if self._run.progress is not None:
                    self._run.progress("apply", self._applied, self._planned)
            else:
                if not must and not self._pool.ready(front):
                    return
                _absorb(self._out, self._pool.get(front))
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
