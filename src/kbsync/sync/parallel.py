"""Parallel sync: one coordinator and any number of workers sharing a PostgreSQL store.

The database is the only coordinator. The process that runs ``kbsync sync``
lists every source (the stat gate needs no reads), settles what passes it,
and puts every other document of the run in the store's work queue, together
with the documents that vanished from the listing. Workers (``kbsync worker``,
on this machine or others, and the coordinator itself) then claim documents
one at a time with ``SELECT … FOR UPDATE SKIP LOCKED``; each one is read,
extracted, chunked, planned, embedded and applied inside the transaction that
holds its claim, so a worker that dies loses nothing: the server rolls its
transaction back and the document goes back to the queue.

What needs every document at once stays with the coordinator, after the
queue is empty: deletions (a vanished document that no worker took as the
origin of a move; with the mass-deletion guard) and boilerplate detection
(from the counts of documents per digest the store keeps, then a backfill of
chunks that stopped being boilerplate). Workers skip the boilerplate the store
knew when the run began, so on a first sync boilerplate chunks are embedded
once; later syncs skip them as a single process does.

This is the parallel driver of :mod:`kbsync.sync`; it runs the steps the single one does.
What a worker does is :mod:`kbsync.sync.work`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbsync.core.plan import (
    Failed,
    Observation,
    StoredDocument,
    plan,
)
from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.model import (
    ItemError,
    SourceItem,
)
from kbsync.report import SyncResult
from kbsync.sources import Source
from kbsync.sync.apply import apply_plan, count_plan, delete_documents, refuse_mass_deletion
from kbsync.sync.chunker import Chunker
from kbsync.sync.embedding import (
    backfill,
    embedded_meta_name,
    refuse_dimension_change,
)
from kbsync.sync.listing import Revisited, keep_schedules, list_source
from kbsync.sync.observe import (
    Derive,
    ExtractorFor,
    count_unchanged,
    deriver,
    stat_gate_passes,
    unchanged_observation,
)
from kbsync.sync.options import BatchLimits, SyncOptions
from kbsync.sync.removed import RemovedSource, forget_released, keep_removed, sources_to_sync
from kbsync.sync.scratch import Scratch
from kbsync.sync.tally import Clock, Progress, SourceTally, SyncReport, utc_now
from kbsync.sync.vector_index import EmbeddedIndex
from kbsync.sync.work import WorkQueue, drain, job_data

__all__ = ["sync_parallel"]


# Starts ``n`` worker processes for a run; returns a function that waits for their exit codes.
Spawn = Callable[[str, int], Callable[[], list[int]]]


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
) -> SyncResult:
    """A sync whose per-document work is shared by ``workers`` processes (this one included).

    ``spawn`` starts the other ``workers - 1`` processes; without it, or with
    one worker, this process does all the work through the same queue. ``options``
    are those of :func:`~kbsync.sync.single.sync_sources`, but for ``dry_run`` (a plan
    runs in one process), ``batch`` (each document is its own transaction),
    ``confirm_above_tokens`` (workers embed as they go) and ``due``, which it refuses.
    """
    options = options or SyncOptions()
    if options.dry_run or options.due or options.confirm_above_tokens is not None \
            or options.batch != BatchLimits():
        raise ConfigError("a parallel sync takes no dry_run, due, confirm_above_tokens or "
                          "batch: plan, confirm and revisit due pages in one process")
    refuse_dimension_change(store, embedder)
    # This process holds the writer lock: what is queued is left from a killed sync, and a
    # worker serving it would apply listings that are out of date (or take a vanished
    # document of that run for the origin of a move).
    store.abandon_runs()
    store.prepare_vectors(embedder.dimension)
    report = SyncReport(dry_run=False, started=utc_now(), embedder=embedder.identity)
    run = _Coordinator(f"{report.started}/{uuid.uuid4().hex[:12]}", store, embedder,
                       extractor_for, chunker, options)
    clock = Clock(report)
    sources, removed, released = sources_to_sync(store, sources, options.allow_mass_delete,
                                                 options.only)
    everything: list[Source] = [*sources, *(s for s in removed if s.name in released)]
    listed = [_enqueue(run, source, report) for source in everything]
    clock.lap("list")
    _work(run, everything, workers, spawn, progress, report)
    clock.lap("documents")
    store.finish_vectors(embedder.dimension)
    clock.lap("index")
    for source, out, its in zip(everything, report.sources, listed, strict=True):
        _finish_source(run, source, its, out)
    store.end_run(run.id)
    clock.lap("finish")
    report.finished = utc_now()
    store.set_meta("chunker", chunker.fingerprint)
    store.set_meta("embedder", embedder.identity)
    forget_released(store, released | {s.name for s in sources})
    for held in (s for s in removed if s.name not in released):
        report.sources.append(SourceTally(source=held.name))
        keep_removed(held, report.sources[-1])
    result = report.result()
    store.record_run(result.started, result.finished, result.to_dict())
    return result


@dataclass(frozen=True)
class _Coordinator:
    """What the coordinator's steps of one run share."""

    id: str
    """The run's name in the work queue."""
    store: WorkQueue
    embedder: Embedder
    extractor_for: ExtractorFor
    chunker: Chunker
    options: SyncOptions


def _work(run: _Coordinator, sources: Sequence[Source], workers: int, spawn: Spawn | None,
          progress: Progress | None, report: SyncReport) -> None:
    """Drain the run's queue here while ``workers - 1`` spawned processes drain it too."""
    store, total = run.store, run.store.pending(run.id)
    # Nothing queued (a no-op sync): no process to start.
    wait = spawn(run.id, min(workers - 1, total)) if spawn is not None and workers > 1 \
        and total else None
    codes: list[int] = []
    try:
        drain(run.id, sources, store, run.embedder, run.extractor_for, run.chunker,
              progress=_overall(store, run.id, total, progress))
    finally:
        if wait is not None:
            codes = wait()
    if any(codes) and report.sources:
        report.sources[0].warnings.append(
            f"{sum(c != 0 for c in codes)} of {len(codes)} worker processes failed; "
            "this process finished their documents")
    # Whatever a dead worker left behind went back to the queue: finish it here.
    drain(run.id, sources, store, run.embedder, run.extractor_for, run.chunker)


def _finish_source(run: _Coordinator, source: Source, listed: _Listed,
                   out: SourceTally) -> None:
    """What needs every document of a source, once the queue is empty: the workers'
    tallies, deletions, revisit schedules, boilerplate and its backfill."""
    store, options = run.store, run.options
    _collect(run.id, source.name, store, out)
    _delete_vanished(run.id, source.name, store, run.embedder, out, listed.stored,
                     options.allow_mass_delete or isinstance(source, RemovedSource))
    keep_schedules(store, source.name, listed.revisited, out)
    if options.index_boilerplate:
        shared: frozenset[str] = frozenset()
    elif listed.changed:
        shared = store.boilerplate_counted(source.name, options.boilerplate_share)
    else:  # nothing read or gone: the digests, and so the boilerplate, are as they were
        shared = store.boilerplate(source.name)
    out.boilerplate_chunks = len(shared)
    store.set_boilerplate(source.name, shared)
    # Recorded as a single-process sync records it, and withdrawn when a vector is still
    # missing: a later sync in one process trusts it to skip the search for such chunks.
    store.set_meta(embedded_meta_name(source.name),
                   run.embedder.identity if backfill(source.name, store, run.embedder, out)
                   else "")


def _overall(store: WorkQueue, run: str, total: int,
             progress: Progress | None) -> Progress | None:
    """Progress of the whole run (every worker's documents), not only this process's."""
    if progress is None:
        return None

    def tick(stage: str, done: int, _: int) -> None:
        progress(stage, total - store.pending(run), total)  # once a batch: one query

    return tick


def _enqueue(run: _Coordinator, source: Source, report: SyncReport) -> _Listed:
    """List one source into a new tally of ``report``, settle what the stat gate passes
    and queue the rest.

    The listing and the manifest wait in a scratch file, as in a single-process
    sync, so this process holds no whole listing.
    """
    out = SourceTally(source=source.name)
    report.sources.append(out)
    if isinstance(source, RemovedSource):
        out.warnings.append("no longer configured: its documents are deleted")
    store, embedder, verify = run.store, run.embedder, run.options.verify
    derive = deriver(run.extractor_for, run.chunker)
    with Scratch(run.options.scratch_dir) as scratch:
        listing = list_source(source, store, derive, verify, scratch, out,
                              accept_root=run.options.accept_root)
        complete = listing.complete
        # Vanished documents first: a worker already serving the run may take one as the
        # origin of a move as soon as the documents that need reading arrive.
        moves = complete and scratch.vanish() > 0
        if moves:
            for page in scratch.gone(_PAGE):
                store.enqueue(run.id, source.name, [(d.key, {}) for d in page],
                              state="vanished")
        queued: list[tuple[str, Mapping[str, Any]]] = []
        settled: list[tuple[Observation, StoredDocument | None]] = []
        reads = 0
        count_unchanged(scratch, verify, out)
        for entry, old in scratch.listing(skip_unchanged=not verify):
            if isinstance(entry, ItemError):
                settled.append((Failed(entry.key, entry.message, missing=entry.missing), old))
            elif (made_with := _gate(entry, old, derive, verify)) is None:
                assert old is not None
                settled.append((unchanged_observation(entry, old), old))
                out.bytes_skipped += entry.stat.size if entry.stat else 0
            else:
                queued.append((entry.key, job_data(entry, made_with, embedder.identity, moves,
                                                     run.options.accept_replacements)))
                reads += 1
            if len(queued) == _PAGE:  # queued as listed, not held for the whole source
                store.enqueue(run.id, source.name, queued)
                queued.clear()
            if len(settled) == _PAGE:
                _settle(source.name, settled, store, embedder, out)
                settled.clear()
        store.enqueue(run.id, source.name, queued)
        _settle(source.name, settled, store, embedder, out)
        return _Listed(scratch.stored_count(), changed=moves or reads > 0,
                       revisited=listing.revisited)


_PAGE = 1000


@dataclass(frozen=True)
class _Listed:
    """What the coordinator learnt of a source's listing: its stored documents, and whether
    any document is to be read or is gone (else its boilerplate cannot have changed)."""

    stored: int
    changed: bool
    revisited: Revisited | None = None


def _gate(item: SourceItem, old: StoredDocument | None, derive: Derive,
          verify: bool) -> str | None:
    """The derivation a worker must read the item with, or None when the stat gate passes."""
    made_with = derive(item.media_type)
    assert made_with is not None
    return None if not verify and stat_gate_passes(item, old, made_with) else made_with


def _settle(source: str, settled: Sequence[tuple[Observation, StoredDocument | None]],
            store: WorkQueue, embedder: Embedder, out: SourceTally) -> None:
    """Apply gate-1 results (unchanged, refreshed validators) and listing failures here."""
    the_plan = plan(source, {old.key: old for _, old in settled if old is not None},
                    [o.key for o, _ in settled], [o for o, _ in settled], listing_complete=False)
    count_plan(out, the_plan.documents)
    apply_plan(the_plan, {}, set(), store, EmbeddedIndex(store), embedder, out, None)


def _collect(run: str, source: str, store: WorkQueue, out: SourceTally) -> None:
    """Add the workers' tallies of one source to its own."""
    for result in store.results(run, source):
        out.merge(SourceTally.from_dict(result))


def _delete_vanished(run: str, source: str, store: WorkQueue, embedder: Embedder,
                     out: SourceTally, stored: int, allow_mass_delete: bool) -> None:
    """Delete what vanished and no worker took as a move's origin, unless that needs consent."""
    gone = store.vanished(run, source)
    if not refuse_mass_deletion(out, stored, len(gone), allow_mass_delete):
        for start in range(0, len(gone), _PAGE):
            page = (store.stored(source, key) for key in gone[start : start + _PAGE])
            delete_documents(store, EmbeddedIndex(store), source,
                             [d for d in page if d is not None], embedder, out)
