"""What every driver does around a source's reading and writing, written once.

A run goes through its sources (:func:`sources_of_run`: the configured ones, and those the
store holds but the configuration no longer names), each with its tally in the report;
a source's steps are the same in every driver (:func:`sync_source`) but for how its
documents are read and how its batches are planned, embedded and applied, which the
driver gives; a run that stops is recorded as interrupted (:func:`record_interrupted`);
and it ends the same way (:func:`finish_run`): its chunking diagnostics, the chunker and
embedder it was made with, the released sources settled, the run recorded.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from kbsync.core.plan import Unchanged
from kbsync.errors import Terminated
from kbsync.report import SyncResult
from kbsync.sources import Source
from kbsync.store import RecordStore, RunLog
from kbsync.sync.context import Context, Decision, ReadJob
from kbsync.sync.failures import FailureMemory
from kbsync.sync.listing import list_source
from kbsync.sync.observe import Derive, deriver
from kbsync.sync.options import SyncOptions
from kbsync.sync.reading import DocumentReader, Read
from kbsync.sync.removed import RemovedSource, forget_released, keep_removed, sources_to_sync
from kbsync.sync.scratch import Scratch, Waiting
from kbsync.sync.steps import decide, delete_gone, finish_source, gate, observe_batch
from kbsync.sync.tally import SourceTally, SyncReport, utc_now

__all__ = [
    "Observe",
    "RunSources",
    "SourceRun",
    "Write",
    "finish_run",
    "kept",
    "observe_listed",
    "record_interrupted",
    "sigterm_as_interrupt",
    "sources_of_run",
    "sync_source",
]

# How a driver reads a listed source: every listed document gated, and what each one comes
# to kept in the scratch file (context, source, scratch, derive, failures, tally).
Observe = Callable[[Context, Source, Scratch, Derive, FailureMemory, SourceTally], None]

# How a driver plans, embeds and applies a source's batches (context, source name, the
# batches, the scratch file they come from, the decision on the source, its tally).
Write = Callable[[Context, str, Iterable[list[Waiting]], Scratch, Decision, SourceTally],
                 None]


@dataclass(frozen=True, slots=True)
class SourceRun:
    """One source a run syncs, its tally (already in the report), and whether its
    documents may all go (a released source's do)."""

    source: Source
    out: SourceTally
    allow_mass_delete: bool


@dataclass(frozen=True, slots=True)
class RunSources:
    """The sources of one run: those configured (of ``only``, when given), the stored ones
    no longer configured, and those of them whose documents may go (``released``)."""

    configured: Sequence[Source]
    removed: Sequence[RemovedSource]
    released: frozenset[str]
    allow_mass_delete: bool

    def each(self, report: SyncReport) -> Iterator[SourceRun]:
        """Each source to sync, in the report's order, its tally added to ``report`` as it
        comes; a removed source not released is only reported, its documents kept
        (:func:`~kbsync.sync.removed.keep_removed`)."""
        for source in [*self.configured, *self.removed]:
            out = SourceTally(source=source.name)
            report.sources.append(out)
            if isinstance(source, RemovedSource):
                if source.name not in self.released:
                    keep_removed(source, out)
                    continue
                out.warnings.append("no longer configured: its documents are deleted")
            yield SourceRun(source, out,
                            self.allow_mass_delete or isinstance(source, RemovedSource))

    @property
    def synced(self) -> list[Source]:
        """The sources whose documents the run goes through (the released ones included)."""
        return [*self.configured, *(s for s in self.removed if s.name in self.released)]

    @property
    def settled(self) -> frozenset[str]:
        """The sources that need no release after this run: deleted, or configured again."""
        return self.released | {s.name for s in self.configured}


def sources_of_run(store: RecordStore, sources: Sequence[Source],
                   options: SyncOptions) -> RunSources:
    """The sources a run with ``options`` goes through
    (:func:`~kbsync.sync.removed.sources_to_sync`)."""
    configured, removed, released = sources_to_sync(store, sources, options.allow_mass_delete,
                                                    options.only)
    return RunSources(configured, removed, released, options.allow_mass_delete)


def sync_source(ctx: Context, log: RunLog, one: SourceRun, observe: Observe,
                write: Write) -> bool:
    """:func:`_source_steps`, stopped by SIGTERM as by Ctrl-C; a run that stops there
    (either, a refusal, a store error) is recorded in ``log`` as interrupted before the
    error goes on. Whether the vectors of documents left alone changed."""
    try:
        with sigterm_as_interrupt():
            return _source_steps(ctx, one, observe, write)
    except BaseException:
        if not ctx.options.dry_run:
            record_interrupted(log, ctx.clock.report)
        raise


def _source_steps(ctx: Context, one: SourceRun, observe: Observe, write: Write) -> bool:
    """The steps (:mod:`kbsync.sync.steps`) for one source: list, gate and observe every
    document (``observe``), decide, then plan, embed and apply a batch at a time
    (``write``), and delete.

    Whether a document is boilerplate depends on every document of the source,
    and it must be known before anything is embedded. So the changed documents
    are read, extracted and chunked first, and only then planned, embedded and
    applied, a batch at a time. What that needs of every document (the listing,
    the store's manifest, each observation and the chunk digests) waits in a
    :class:`~kbsync.sync.scratch.Scratch` file, so memory does not grow with the
    source. Deletions wait for the last batch.
    """
    source, out, options = one.source, one.out, ctx.options
    memory = FailureMemory(ctx.store, source.name)
    with Scratch(options.scratch_dir) as scratch:
        derive = deriver(ctx.extractor_for, ctx.chunker)
        listed = list_source(source, ctx.store, derive, options.verify, scratch, out,
                             dry_run=options.dry_run, due=options.due and not options.verify,
                             accept_root=options.accept_root)
        ctx.clock.lap("list")
        stored = scratch.stored_count()
        observe(ctx, source, scratch, derive, memory, out)
        decision = decide(ctx, source.name, scratch, listed.complete, out)
        limits = options.batch
        write(ctx, source.name, scratch.batches(limits.documents, limits.bytes, limits.first),
              scratch, decision, out)
        delete_gone(ctx, source.name, scratch, stored, one.allow_mass_delete, out)
    return finish_source(ctx, source.name, listed, memory, decision, out)


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


def finish_run(ctx: Context, store: RecordStore, report: SyncReport,
               sources: RunSources) -> SyncResult:
    """End a run whose sources are all done: its chunking diagnostics and end time in
    ``report``; unless a dry run, the chunker and embedder it was made with kept, the
    sources it settled no longer released, and the run recorded. Its result."""
    report.diagnostics = ctx.chunker.text_chunker().diagnose_tally(ctx.tally)
    report.finished = utc_now()
    result = report.result()
    if not ctx.options.dry_run:
        store.set_meta("chunker", ctx.chunker.fingerprint)
        store.set_meta("embedder", report.embedder)
        forget_released(store, sources.settled)
        store.record_run(result.started, result.finished, result.to_dict())
    return result
