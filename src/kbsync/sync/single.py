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
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from kbsync.core.plan import (
    Action,
    Failed,
    Observation,
    StoredDocument,
    Unchanged,
)
from kbsync.embed import Embedder
from kbsync.errors import Terminated
from kbsync.model import ItemError, SourceItem
from kbsync.report import SyncResult
from kbsync.sources import Source
from kbsync.store import RecordStore, RunLog
from kbsync.sync.apply import delete_documents, refuse_mass_deletion
from kbsync.sync.batches import Added, Batch, Counted, Pipeline, Run, plan_batch
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
from kbsync.sync.observe import (
    Derive,
    ExtractorFor,
    count_unchanged,
    deriver,
    observe,
    stat_gate_passes,
    unchanged_observation,
)
from kbsync.sync.options import SyncOptions
from kbsync.sync.reading import (
    POOL_MIN_DOCUMENTS,
    DocumentReader,
    Read,
    Readers,
    read_workers,
)
from kbsync.sync.removed import RemovedSource, forget_released, keep_removed, sources_to_sync
from kbsync.sync.scratch import Scratch
from kbsync.sync.tally import Clock, Progress, SourceTally, SyncReport, utc_now
from kbsync.sync.vector_index import EmbeddedIndex, VectorIndex

__all__ = ["delete_vanished", "gate", "record_interrupted", "sigterm_as_interrupt",
           "source_boilerplate", "sync_sources"]


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
    if index is None:
        index = EmbeddedIndex(store)
    # Changes that touch vectors of documents the plan leaves alone (a rebuilt
    # collection, boilerplate coming or going, a backfill) end in one rewrite.
    rewrite = False if dry_run else index.begin(embedder.dimension)
    run = Run(store, embedder, extractor_for, chunker, options, progress=progress, index=index,
              clock=Clock(report), tally=Counter())
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
    report.diagnostics = chunker.text_chunker().diagnose_tally(run.tally)
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


def _sync_source(run: Run, store: RecordStore, source: Source, allow_mass_delete: bool,
                 out: SourceTally) -> bool:
    """:func:`_sync_source_steps`, stopped by SIGTERM as by Ctrl-C; a run that stops there
    (either, a refusal, a store error) is recorded as interrupted before the error goes on."""
    try:
        with sigterm_as_interrupt():
            return _sync_source_steps(run, store, source, allow_mass_delete, out)
    except BaseException:
        if not run.options.dry_run:
            record_interrupted(store, run.clock.report)
        raise


def _sync_source_steps(run: Run, store: RecordStore, source: Source, allow_mass_delete: bool,
                       out: SourceTally) -> bool:
    """List, observe, then plan, embed and apply one source a batch at a time.

    Whether a document is boilerplate depends on every document of the source,
    and it must be known before anything is embedded. So the changed documents
    are read, extracted and chunked first, and only then planned, embedded and
    applied, a batch at a time. What that needs of every document (the listing,
    the store's manifest, each observation and the chunk digests) waits in a
    :class:`~kbsync.sync.scratch.Scratch` file, so memory does not grow with the
    source. Deletions wait for the last batch, which may have moved a vanished
    document. Returns whether the vectors of documents left alone changed.
    """
    dry_run = run.options.dry_run
    memory = FailureMemory(store, source.name)
    with Scratch(run.options.scratch_dir) as scratch:
        derive = deriver(run.extractor_for, run.chunker)
        listed = list_source(source, store, derive, run.options.verify, scratch, out,
                             dry_run=dry_run, due=run.options.due and not run.options.verify,
                             accept_root=run.options.accept_root)
        run.clock.lap("list")
        stored = scratch.stored_count()
        _observe_source(run, source, scratch, derive, memory, out)
        vanished = scratch.vanish() if listed.complete else 0
        shared = source_boilerplate(run, source.name, scratch, vanished, out)
        skip = frozenset() if run.options.index_boilerplate else shared
        same_boilerplate = store.boilerplate(source.name) == skip
        # Whether every current chunk has its vector, as the last sync left it: then
        # nothing since has taken one away (a sync embeds what it applies), and the
        # query of every chunk against the cache is not needed, here or at the end.
        embedded = (not run.options.verify and same_boilerplate
                    and store.get_meta(embedded_meta_name(source.name)) == run.embedder.identity)
        limits = run.options.batch
        batches = scratch.batches(limits.documents, limits.bytes, limits.first)
        if dry_run:
            _plan_batches(run, source.name, batches, scratch, skip, shared, out)
        else:
            store.set_boilerplate(source.name, skip)
            limit = run.options.confirm_above_tokens
            if limit is not None:
                confirm_bill(store, run.embedder, source.name, scratch, skip, limit,
                             embedded=embedded, setting=run.options.bound_setting)
            _write_batches(run, source.name, batches, scratch, skip, shared, out)
        delete_vanished(run, source.name, scratch, stored, allow_mass_delete, out)
        memory.settle(out)
        if not dry_run:
            keep_schedules(store, source.name, listed.revisited, out)
            if listed.complete:  # else failures of unlisted documents would be forgotten
                memory.save(store)
    if dry_run:
        if not embedded:
            out.embeddings_backfill = len(store.unembedded(source.name, run.embedder.identity))
        out.embeddings_to_compute += out.embeddings_backfill
        return False
    if not embedded and backfill(source.name, store, run.embedder, out):
        store.set_meta(embedded_meta_name(source.name), run.embedder.identity)
    run.clock.lap("apply")
    return not same_boilerplate or out.embeddings_backfill > 0


def source_boilerplate(run: Run, source: str, scratch: Scratch, vanished: int,
                       out: SourceTally) -> frozenset[str]:
    """The source's boilerplate: counted again over every document it keeps when this run
    re-chunked or lost some, else as the store has it."""
    if scratch.rechunked_count() or vanished:
        scratch.count_stored(run.store.chunk_digests(source))
        shared = scratch.boilerplate(run.options.boilerplate_share)
    else:
        shared = run.store.boilerplate(source)
    out.boilerplate_chunks = len(shared)
    return shared


def _observe_source(run: Run, source: Source, scratch: Scratch, derive: Derive,
                    memory: FailureMemory, out: SourceTally) -> None:
    """Gate every listed document; keep in ``scratch`` what each one came to, unless unchanged.

    What the stat gate passes with nothing to refresh is only counted, in one query.
    A listing error with a key means the document exists but cannot be taken now:
    it fails (and keeps its stored version). Documents to read go to a pool of
    reading processes when there are enough of them (:mod:`kbsync.sync.reading`).
    A document that failed before as it is now is skipped (``memory``).
    """
    total = scratch.listed_count() - count_unchanged(scratch, run.options.verify, out)
    workers = read_workers(run.options.read_workers)
    pooled = workers > 1 and total >= POOL_MIN_DOCUMENTS and _can_fork()

    def done(read: Read) -> None:
        out.merge(read.tally)
        run.tally.update(read.shapes)
        for seen in read.observations:
            if isinstance(seen, Unchanged):
                out.documents[str(Action.UNCHANGED)] += 1
            else:
                scratch.keep(seen)

    with (Readers(workers, source, run.extractor_for, run.chunker, done) if pooled
          else contextlib.nullcontext()) as readers:
        for n, (entry, old) in enumerate(scratch.listing(skip_unchanged=not run.options.verify),
                                         1):
            if isinstance(entry, ItemError):
                scratch.observe(Failed(entry.key, entry.message, missing=entry.missing), old)
            else:
                gate(run, source, entry, old, derive, memory, out, scratch, readers)
            if run.progress is not None:
                run.progress("read", n, total)
        if readers is not None:
            readers.finish()
    run.clock.lap("read")


def gate(run: Run, source: Source, item: SourceItem, old: StoredDocument | None,
         derive: Derive, memory: FailureMemory, out: SourceTally, scratch: Scratch,
         readers: DocumentReader | None) -> None:
    """One listed document: the stat gate here, else a read and gates 2 and 3 (by a reading
    process when there are ``readers``); what it comes to goes to ``scratch``. One that
    failed before as it is now is not read: its stored version, if any, stays."""
    made_with = derive(item.media_type)
    assert made_with is not None
    if not run.options.verify and stat_gate_passes(item, old, made_with):
        assert old is not None
        out.bytes_skipped += item.stat.size if item.stat else 0
        _keep(unchanged_observation(item, old), old, scratch, out)
        return
    if not run.options.verify and memory.skip(item, made_with, out):
        out.bytes_skipped += item.stat.size if item.stat else 0
        return
    if readers is not None:
        readers.read(item, old, made_with)
        return
    extractor = run.extractor_for(item.media_type)
    assert extractor is not None
    seen = observe(source, item, old, extractor, made_with, run.chunker, out, run.count_chunk)
    _keep(seen, old, scratch, out)


def _keep(seen: Observation, old: StoredDocument | None, scratch: Scratch,
          out: SourceTally) -> None:
    if isinstance(seen, Unchanged):
        out.documents[str(Action.UNCHANGED)] += 1
    else:
        scratch.observe(seen, old)


def _can_fork() -> bool:
    """Whether reading processes can be forked: on a platform that forks, and not from a
    thread other than the main one (a fork copies only the forking thread)."""
    return hasattr(os, "fork") and threading.current_thread() is threading.main_thread()


def _plan_batches(run: Run, source: str, batches: Iterable[Batch], scratch: Scratch,
                  skip: frozenset[str], shared: frozenset[str], out: SourceTally) -> None:
    """Plan each batch and count it, as a sync would (a dry run): what earlier batches
    would embed is taken as embedded, since nothing is cached."""
    added = Added(scratch.recurring())
    for batch in batches:
        the_plan, _ = plan_batch(run, source, batch, scratch, skip, shared, out, added.digests)
        count_reused(the_plan, out)
        added.note(the_plan)


def _write_batches(run: Run, source: str, batches: Iterable[Batch], scratch: Scratch,
                   skip: frozenset[str], shared: frozenset[str], out: SourceTally) -> None:
    """Plan, embed and apply each batch, a batch's embedding running while the one before
    it is applied and the next one planned (:class:`~kbsync.sync.batches.Pipeline`)."""
    pipeline = Pipeline(run, source, skip, out)
    counted = Counted(run.progress)
    try:
        for batch in batches:
            the_plan, borrowed = plan_batch(run, source, batch, scratch, skip, shared, out,
                                            pipeline.in_flight())
            pipeline.push(the_plan, borrowed, counted.batch())
        pipeline.finish()
    finally:
        pipeline.stop()


def delete_vanished(run: Run, source: str, scratch: Scratch, stored: int,
                    allow_mass_delete: bool, out: SourceTally) -> None:
    """Delete what vanished and moved nowhere, unless that needs consent (the one policy)."""
    if refuse_mass_deletion(out, stored, scratch.gone_count(), allow_mass_delete):
        return
    for page in scratch.gone(run.options.batch.documents):
        delete_documents(run.store, run.index, source, page, run.embedder, out, run.progress,
                         dry_run=run.options.dry_run)
