"""The PostgreSQL driver: one coordinator and any number of workers sharing a PostgreSQL store.

The database is the only coordinator. The process that runs ``kbsync sync``
lists every source and gates each listed document against its stored version
(:func:`~kbsync.sync.steps.gate`), as a single process does; what the stat gate
settles is queued as observed, every other document as one to read. Workers
(``kbsync worker``, on this machine or others, and the coordinator itself) then claim
batches with ``SELECT … FOR UPDATE SKIP LOCKED`` (:mod:`kbsync.sync.work`) and read
them. Once every document of the run is observed, the coordinator decides what needs
a whole source (:func:`~kbsync.sync.steps.decide`: what vanished, the boilerplate,
each move's origin, the bill guard) from the facts the workers left, and releases
the documents; the workers claim them again to plan, embed and apply them. The
coordinator ends with what follows the last batch: the workers' tallies merged in the
order one process would have made them, deletions behind the mass-deletion guard,
remembered failures, revisit schedules, backfill.

Every step is the one the single-process driver runs, so both give the same store
and the same report (``tests/integration/test_drivers_agree.py``). A worker that
dies loses nothing: the server rolls its transaction back and its batch goes back to
the queue.
"""

from __future__ import annotations

import contextlib
import pickle
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kbsync.core.plan import Observation, Unchanged
from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.report import SyncResult
from kbsync.sources import Source
from kbsync.sync.chunker import Chunker
from kbsync.sync.context import Context, Decision, ReadJob
from kbsync.sync.embedding import refuse_dimension_change
from kbsync.sync.failures import FailureMemory
from kbsync.sync.listing import Listed, list_source
from kbsync.sync.observe import ExtractorFor, count_unchanged, deriver
from kbsync.sync.options import BatchLimits, SyncOptions
from kbsync.sync.run import SourceRun, finish_run, record_interrupted, sources_of_run
from kbsync.sync.scratch import Facts, Scratch, facts_of
from kbsync.sync.steps import decide, delete_gone, finish_source, gate, merge_results
from kbsync.sync.tally import Clock, Progress, SourceTally, SyncReport, utc_now
from kbsync.sync.vector_index import EmbeddedIndex, VectorIndex
from kbsync.sync.work import APPLY, READ, WorkQueue, drain, job_data

__all__ = ["sync_parallel"]


# Starts ``n`` worker processes for a run; returns a function that waits for their exit codes.
Spawn = Callable[[str, int], Callable[[], list[int]]]

_PAGE = 1000


def sync_parallel(
    sources: Sequence[Source],
    store: WorkQueue,
    embedder: Embedder,
    extractor_for: ExtractorFor,
    chunker: Chunker,
    options: SyncOptions | None = None,
    *,
    workers: int = 1,
    spawn: Spawn | None = None,
    progress: Progress | None = None,
    index: VectorIndex | None = None,
) -> SyncResult:
    """A sync whose per-document work is shared by ``workers`` processes (this one included).

    ``spawn`` starts the other ``workers - 1`` processes; without it, or with
    one worker, this process does all the work through the same queue. ``options``
    are those of :func:`~kbsync.sync.single.sync_sources` (``due``, the bill's bound
    ``confirm_above_tokens``, and the rest), but for ``dry_run`` (a plan runs in one
    process) and ``batch`` (workers claim batches of their own), which it refuses. The
    vectors go to ``index`` (the store's own by default), from every worker.
    """
    options = options or SyncOptions()
    if options.dry_run or options.batch != BatchLimits():
        raise ConfigError("a parallel sync takes no dry_run or batch: plan in one process")
    refuse_dimension_change(store, embedder)
    # This process holds the writer lock: what is queued is left from a killed sync, and a
    # worker serving it would apply listings that are out of date.
    store.abandon_runs()
    store.prepare_vectors(embedder.dimension)
    report = SyncReport(dry_run=False, started=utc_now(), embedder=embedder.identity)
    index = index or EmbeddedIndex(store)
    rewrite = index.begin(embedder.dimension)
    ctx = Context(store, embedder, extractor_for, chunker, options, None, index, Clock(report))
    run = f"{report.started}/{uuid.uuid4().hex[:12]}"
    store.begin_run(run)
    chosen = sources_of_run(store, sources, options)
    try:
        with contextlib.ExitStack() as scratches:
            sourced = []
            for one in chosen.each(report):
                scratch = scratches.enter_context(Scratch(options.scratch_dir))
                sourced.append(_enqueue(ctx, run, one, scratch))
            ctx.clock.lap("list")
            _work(ctx, run, chosen.synced, sourced, workers, spawn, progress)
            store.finish_vectors(embedder.dimension)
            ctx.clock.lap("index")
            for each in sourced:
                merge_results(ctx, each.out, store.results(run, each.name))
                delete_gone(ctx, each.name, each.scratch, each.stored, each.allow_mass_delete,
                            each.out)
                assert each.decision is not None
                rewrite |= finish_source(ctx, each.name, each.listed, each.memory,
                                         each.decision, each.out)
        index.end(rewrite, embedder.identity, embedder.dimension)
        store.end_run(run)
        ctx.clock.lap("finish")
    except BaseException:
        record_interrupted(store, report)
        raise
    return finish_run(ctx, store, report, chosen)


@dataclass
class _Source:
    """A source of the run as the coordinator follows it: its listing in ``scratch``, its
    remembered failures, its tally, and what was decided on it."""

    name: str
    scratch: Scratch
    listed: Listed
    memory: FailureMemory
    stored: int
    allow_mass_delete: bool
    out: SourceTally
    decision: Decision | None = field(default=None)


def _enqueue(ctx: Context, run: str, one: SourceRun, scratch: Scratch) -> _Source:
    """List one source into ``scratch`` and gate each listed document: what the stat gate
    settles is queued as observed, the rest to be read (a page at a time, so this process
    holds no whole listing)."""
    store, options, source, out = ctx.store, ctx.options, one.source, one.out
    assert isinstance(store, WorkQueue)
    verify = options.verify
    derive = deriver(ctx.extractor_for, ctx.chunker)
    memory = FailureMemory(store, source.name)
    listed = list_source(source, store, derive, verify, scratch, out,
                         due=options.due and not verify, accept_root=options.accept_root)
    count_unchanged(scratch, verify, out)
    queued: list[tuple[str, dict[str, Any]]] = []
    settled: list[tuple[str, bytes, dict[str, Any]]] = []
    for entry, old in scratch.listing(skip_unchanged=not verify):
        seen = gate(ctx, entry, old, derive, memory, out)
        if isinstance(seen, ReadJob):
            queued.append((seen.item.key, job_data(seen.item, seen.derivation,
                                                   ctx.embedder.identity)))
        elif seen is not None and not isinstance(seen, Unchanged):
            settled.append((seen.key, pickle.dumps((seen, old), protocol=pickle.HIGHEST_PROTOCOL),
                            facts_of(seen, old).to_dict()))
        if len(queued) == _PAGE:
            store.enqueue(run, source.name, queued)
            queued.clear()
        if len(settled) == _PAGE:
            store.enqueue_observed(run, source.name, settled)
            settled.clear()
    store.enqueue(run, source.name, queued)
    store.enqueue_observed(run, source.name, settled)
    return _Source(source.name, scratch, listed, memory, scratch.stored_count(),
                   one.allow_mass_delete, out)


def _work(ctx: Context, run: str, sources: Sequence[Source], sourced: Sequence[_Source],
          workers: int, spawn: Spawn | None, progress: Progress | None) -> None:
    """Observe the run's documents here while ``workers - 1`` spawned processes do too;
    decide on each source; then apply them all the same way."""
    store = ctx.store
    assert isinstance(store, WorkQueue)
    total = store.pending(run)
    # Nothing queued (a no-op sync): no process to start.
    wait = spawn(run, min(workers - 1, total)) if spawn is not None and workers > 1 \
        and total else None
    codes: list[int] = []
    try:
        drain(run, sources, ctx, state=READ, progress=_overall(store, run, total, progress))
        ctx.clock.lap("read")
        for one in sourced:
            one.decision = _decide(ctx, run, one)
        drain(run, sources, ctx, state=APPLY, progress=_overall(store, run, total, progress))
    except BaseException:
        # The workers wait for decisions while this process lives: with the run gone,
        # they stop.
        with contextlib.suppress(Exception):
            store.end_run(run)
        raise
    finally:
        if wait is not None:
            codes = wait()
    if any(codes) and sourced:
        sourced[0].out.warnings.append(
            f"{sum(c != 0 for c in codes)} of {len(codes)} worker processes failed; "
            "this process finished their documents")
    # Whatever a dead worker left behind went back to the queue: finish it here.
    drain(run, sources, ctx, state=APPLY)


def _decide(ctx: Context, run: str, one: _Source) -> Decision:
    """Decide on a source from the facts of its observations, and release them to apply."""
    store = ctx.store
    assert isinstance(store, WorkQueue)
    for _, facts in store.facts(run, one.name):
        one.scratch.note(Facts.from_dict(facts))

    def observations() -> Iterator[Observation]:
        for blob in store.observations(run, one.name):
            observation, _ = pickle.loads(blob)
            yield observation

    decision = decide(ctx, one.name, one.scratch, one.listed.complete, one.out, observations)
    notes: dict[str, dict[str, Any]] = {}
    for key, origin in one.scratch.moves():
        notes.setdefault(key, {})["origin"] = origin
    for key, digest in one.scratch.shared_fresh():
        if digest not in decision.skip:
            notes.setdefault(key, {}).setdefault("shares", []).append(digest)
    store.release(run, one.name, decision.to_dict(), notes)
    return decision


def _overall(store: WorkQueue, run: str, total: int,
             progress: Progress | None) -> Progress | None:
    """Progress of the whole run (every worker's documents), not only this process's."""
    if progress is None:
        return None

    def tick(stage: str, done: int, _: int) -> None:
        progress(stage, total - store.pending(run), total)  # once a batch: one query

    return tick
