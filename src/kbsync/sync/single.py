"""The single-process driver: gates, plan, embed the misses, apply, report, source by source.

A source goes through in batches of documents (:class:`BatchLimits`), so memory
does not grow with its size: nothing of a batch is written until its plan is
complete, and then the batch's documents in one transaction (each document in
its own when an external vector store needs the outbox protocol).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

from kbsync.core.plan import Unchanged
from kbsync.embed import Embedder
from kbsync.errors import Terminated
from kbsync.report import SyncResult
from kbsync.sources import Source
from kbsync.store import RecordStore, RunLog
from kbsync.sync.batches import Added, Pipeline
from kbsync.sync.chunker import Chunker
from kbsync.sync.context import Context, Decision, ReadJob
from kbsync.sync.embedding import count_reused, refuse_dimension_change
from kbsync.sync.failures import FailureMemory
from kbsync.sync.listing import list_source
from kbsync.sync.observe import Derive, ExtractorFor, count_unchanged, deriver
from kbsync.sync.options import SyncOptions
from kbsync.sync.reading import (
    POOL_MIN_DOCUMENTS,
    DocumentReader,
    Read,
    Readers,
    read_workers,
)
from kbsync.sync.removed import RemovedSource, forget_released, keep_removed, sources_to_sync
from kbsync.sync.scratch import Scratch, Waiting, batch_chunks
from kbsync.sync.steps import (
    decide,
    delete_gone,
    finish_source,
    gate,
    observe_batch,
    plan_batch,
)
from kbsync.sync.tally import Clock, Counted, Progress, SourceTally, SyncReport, utc_now
from kbsync.sync.vector_index import EmbeddedIndex, VectorIndex

__all__ = ["kept", "observe_listed", "record_interrupted", "sigterm_as_interrupt",
           "sync_sources"]


def sync_sources(
    sources: Sequence[Source],
    store: RecordStore,
    embedder: Embedder,
    extractor_for: ExtractorFor,
    chunker: Chunker,
    options: SyncOptions | None = None,
    *,
    progress: Progress | None = None,
    index: VectorIndex | None = None,
) -> SyncResult:
    """Bring ``store`` in step with ``sources`` (or, with ``options.dry_run``, only plan it).

    A source whose chunks to embed (cache misses) come to more than
    ``options.confirm_above_tokens`` raises :class:`~kbsync.errors.ConfirmationRequiredError`
    before any of it is embedded or written. A run that stops (that error, Ctrl-C,
    SIGTERM, a store error) is recorded as interrupted, with what it applied; every
    embedding computed is in the cache already.

    The vectors go to ``index`` (the store's own by default; an external vector
    store's through :class:`~kbsync.sync.vector_index.MirroredIndex`).
    Documents are planned, embedded and applied a batch at a time, so memory does
    not grow with the size of a source (see :func:`_sync_source_steps`), a batch's
    embedding running while the one before it is applied. A new
    text that shares almost nothing with the stored one (a re-examine verdict) is
    held until a later sync sees it again, unless ``options.accept_replacements``
    (see :func:`~kbsync.sync.replacements.route_replacement`).
    """
    options = options or SyncOptions()
    refuse_dimension_change(store, embedder)
    dry_run = options.dry_run
    report = SyncReport(dry_run=dry_run, started=utc_now(), embedder=embedder.identity)
    loaded = getattr(embedder, "load_seconds", None)  # a model loaded before is not this run's
    if index is None:
        index = EmbeddedIndex(store)
    # Changes that touch vectors of documents the plan leaves alone (a rebuilt
    # collection, boilerplate coming or going, a backfill) end in one rewrite.
    rewrite = False if dry_run else index.begin(embedder.dimension)
    run = Context(store, embedder, extractor_for, chunker, options, progress=progress,
                  index=index, clock=Clock(report))
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
        rewrite |= _sync_source(run, store, source,
                                options.allow_mass_delete or isinstance(source, RemovedSource),
                                tally)
    if not dry_run:
        index.end(rewrite, embedder.identity, embedder.dimension)
        run.clock.lap("index")  # deferred indexes built, vectors rewritten: as on Ray
    report.diagnostics = chunker.text_chunker().diagnose_tally(run.tally)
    if loaded is None:
        report.model_load_seconds = getattr(embedder, "load_seconds", None)
    report.finished = utc_now()
    result = report.result()
    if not dry_run:
        store.set_meta("chunker", chunker.fingerprint)
        store.set_meta("embedder", embedder.identity)
        forget_released(store, released | {s.name for s in sources})
        store.record_run(result.started, result.finished, result.to_dict())
    return result


def record_interrupted(store: RunLog, report: SyncReport) -> None:
    """Record a run that stopped before its end, with what it did until then."""
    report.finished = utc_now()
    with contextlib.suppress(Exception):  # the store may be what failed: the cause goes on
        result = report.result()
        store.record_run(result.started, result.finished,
                         {**result.to_dict(), "interrupted": True})


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within, SIGTERM stops the run as Ctrl-C does (a clean stop, recorded), not mid-write.

    Only in the main thread and only where nobody else handles SIGTERM.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise Terminated(signum, signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _sync_source(run: Context, store: RecordStore, source: Source, allow_mass_delete: bool,
                 out: SourceTally) -> bool:
    """:func:`_sync_source_steps`, stopped by SIGTERM as by Ctrl-C; a run that stops there
    (either, a refusal, a store error) is recorded as interrupted before the error goes on."""
    try:
        with sigterm_as_interrupt():
            return _sync_source_steps(run, source, allow_mass_delete, out)
    except BaseException:
        if not run.options.dry_run:
            record_interrupted(store, run.clock.report)
        raise


def _sync_source_steps(run: Context, source: Source, allow_mass_delete: bool,
                       out: SourceTally) -> bool:
    """The steps (:mod:`kbsync.sync.steps`) for one source: list, gate and observe every
    document, decide, then plan, embed and apply a batch at a time, and delete.

    Whether a document is boilerplate depends on every document of the source,
    and it must be known before anything is embedded. So the changed documents
    are read, extracted and chunked first, and only then planned, embedded and
    applied, a batch at a time. What that needs of every document (the listing,
    the store's manifest, each observation and the chunk digests) waits in a
    :class:`~kbsync.sync.scratch.Scratch` file, so memory does not grow with the
    source. Deletions wait for the last batch. Returns whether the vectors of
    documents left alone changed.
    """
    dry_run = run.options.dry_run
    memory = FailureMemory(run.store, source.name)
    with Scratch(run.options.scratch_dir) as scratch:
        derive = deriver(run.extractor_for, run.chunker)
        listed = list_source(source, run.store, derive, run.options.verify, scratch, out,
                             dry_run=dry_run, due=run.options.due and not run.options.verify,
                             accept_root=run.options.accept_root)
        run.clock.lap("list")
        stored = scratch.stored_count()
        _observe_source(run, source, scratch, derive, memory, out)
        decision = decide(run, source.name, scratch, listed.complete, out)
        limits = run.options.batch
        batches = scratch.batches(limits.documents, limits.bytes, limits.first)
        if dry_run:
            _plan_batches(run, source.name, batches, scratch, decision, out)
        else:
            _write_batches(run, source.name, batches, scratch.observed_count(),
                           scratch.fresh_chunk_count(), decision, out)
        delete_gone(run, source.name, scratch, stored, allow_mass_delete, out)
    return finish_source(run, source.name, listed, memory, decision, out)


def _observe_source(run: Context, source: Source, scratch: Scratch, derive: Derive,
                    memory: FailureMemory, out: SourceTally) -> None:
    """Gate every listed document; keep in ``scratch`` what each one came to, unless
    unchanged (:func:`observe_listed`).

    What the stat gate passes with nothing to refresh is only counted, in one query.
    Documents to read go to a pool of reading processes when there are enough of them
    (:mod:`kbsync.sync.reading`), else are read here
    (:func:`~kbsync.sync.steps.observe_batch`).
    """
    total = scratch.listed_count() - count_unchanged(scratch, run.options.verify, out)
    workers = read_workers(run.options.read_workers)
    pooled = workers > 1 and total >= POOL_MIN_DOCUMENTS and _can_fork()
    with (Readers(workers, source, run.extractor_for, run.chunker, kept(run, scratch, out))
          if pooled else contextlib.nullcontext()) as readers:
        observe_listed(run, source, scratch, derive, memory, out, total, readers)


def observe_listed(run: Context, source: Source, scratch: Scratch, derive: Derive,
                   memory: FailureMemory, out: SourceTally, total: int,
                   readers: DocumentReader | None) -> None:
    """Gate each listed document of ``scratch`` (:func:`~kbsync.sync.steps.gate`, ``total``
    of them to tell progress of) and keep what it comes to; the documents to read go to
    ``readers`` (finished at the end), else are read here."""
    for n, (entry, old) in enumerate(scratch.listing(skip_unchanged=not run.options.verify),
                                     1):
        seen = gate(run, entry, old, derive, memory, out)
        if isinstance(seen, ReadJob):
            if readers is not None:
                readers.read(seen.item, seen.old, seen.derivation)
            else:
                _read_here(run, source, seen, scratch, out)
        elif seen is not None and not isinstance(seen, Unchanged):
            scratch.observe(seen, old)
        if run.progress is not None:
            run.progress("read", n, total)
    if readers is not None:
        readers.finish()
    run.clock.lap("read")


def kept(run: Context, scratch: Scratch, out: SourceTally) -> Callable[[Read], None]:
    """What to do with the documents read elsewhere: their tallies counted, what each came
    to kept in ``scratch`` (unless unchanged)."""

    def keep(read: Read) -> None:
        out.merge(read.tally)
        run.tally.update(read.shapes)
        for seen in read.observations:
            if not isinstance(seen, Unchanged):
                scratch.keep(seen)

    return keep


def _read_here(run: Context, source: Source, job: ReadJob, scratch: Scratch,
               out: SourceTally) -> None:
    """Read one document in this process; what it comes to goes to ``scratch``."""
    done = observe_batch(source, [job], run.extractor_for, run.chunker)
    out.merge(done.tally)
    run.tally.update(done.shapes)
    for seen, old in done.observations:
        if not isinstance(seen, Unchanged):
            scratch.observe(seen, old)


def _can_fork() -> bool:
    """Whether reading processes can be forked: on a platform that forks, and not from a
    thread other than the main one (a fork copies only the forking thread)."""
    return hasattr(os, "fork") and threading.current_thread() is threading.main_thread()


def _plan_batches(run: Context, source: str, batches: Iterable[list[Waiting]],
                  scratch: Scratch, decision: Decision, out: SourceTally) -> None:
    """Plan each batch and count it, as a sync would (a dry run): what earlier batches
    would embed is taken as embedded, since nothing is cached."""
    added = Added(scratch.recurring())
    for batch in batches:
        the_plan, _ = plan_batch(run, source, batch, decision, out, added.digests)
        count_reused(the_plan, out)
        added.note(the_plan)


def _write_batches(run: Context, source: str, batches: Iterable[list[Waiting]],
                   documents: int, chunks: int, decision: Decision, out: SourceTally) -> None:
    """Plan, embed and apply each batch (of ``documents`` holding ``chunks`` chunked in
    this run, in all), a batch's embedding running while the one before it is applied and
    the next one planned (:class:`~kbsync.sync.batches.Pipeline`); the embedding's
    progress counted in chunks."""
    pipeline = Pipeline(run, decision.skip, out)
    counted = Counted(run.progress, documents, chunks)
    try:
        for batch in batches:
            the_plan, borrowed = plan_batch(run, source, batch, decision, out,
                                            pipeline.in_flight())
            pipeline.push(the_plan, borrowed, counted.batch(len(batch), batch_chunks(batch)))
        pipeline.finish()
    finally:
        pipeline.stop()
