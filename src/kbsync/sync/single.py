"""The single-process driver: gates, plan, embed the misses, apply, report, source by source.

A source goes through in batches of documents (:class:`BatchLimits`), so memory
does not grow with its size: nothing of a batch is written until its plan is
complete, and then the batch's documents in one transaction (each document in
its own when an external vector store needs the outbox protocol).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Sequence

from kbsync.embed import Embedder
from kbsync.report import SyncResult
from kbsync.sources import Source
from kbsync.store import RecordStore
from kbsync.sync.batches import Added, Pipeline
from kbsync.sync.chunker import Chunker
from kbsync.sync.context import Context, Decision
from kbsync.sync.embedding import count_reused, refuse_dimension_change
from kbsync.sync.failures import FailureMemory
from kbsync.sync.observe import Derive, ExtractorFor, count_unchanged
from kbsync.sync.options import SyncOptions
from kbsync.sync.reading import POOL_MIN_DOCUMENTS, Readers, read_workers
from kbsync.sync.run import finish_run, kept, observe_listed, sources_of_run, sync_source
from kbsync.sync.scratch import Scratch, Waiting, batch_chunks
from kbsync.sync.steps import plan_batch
from kbsync.sync.tally import Clock, Counted, Progress, SourceTally, SyncReport, utc_now
from kbsync.sync.vector_index import EmbeddedIndex, VectorIndex

__all__ = ["sync_sources"]


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
    not grow with the size of a source (see :func:`~kbsync.sync.run.sync_source`), a batch's
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
    chosen = sources_of_run(store, sources, options)
    for one in chosen.each(report):
        rewrite |= sync_source(run, store, one, _observe_source, _write_source)
    if not dry_run:
        index.end(rewrite, embedder.identity, embedder.dimension)
        run.clock.lap("index")  # deferred indexes built, vectors rewritten: as on Ray
    if loaded is None:
        report.model_load_seconds = getattr(embedder, "load_seconds", None)
    return finish_run(run, store, report, chosen)


def _observe_source(run: Context, source: Source, scratch: Scratch, derive: Derive,
                    memory: FailureMemory, out: SourceTally) -> None:
    """Gate every listed document; keep in ``scratch`` what each one came to, unless
    unchanged (:func:`~kbsync.sync.run.observe_listed`).

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


def _can_fork() -> bool:
    """Whether reading processes can be forked: on a platform that forks, and not from a
    thread other than the main one (a fork copies only the forking thread)."""
    return hasattr(os, "fork") and threading.current_thread() is threading.main_thread()


def _write_source(run: Context, source: str, batches: Iterable[list[Waiting]],
                  scratch: Scratch, decision: Decision, out: SourceTally) -> None:
    """A source's batches planned and counted (a dry run), else planned, embedded and
    applied."""
    if run.options.dry_run:
        _plan_batches(run, source, batches, scratch, decision, out)
    else:
        _write_batches(run, source, batches, scratch.observed_count(),
                       scratch.fresh_chunk_count(), decision, out)


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
