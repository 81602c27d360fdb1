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
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from kbsync.chunking import ChunkShape, shape_of
from kbsync.embed import Embedder
from kbsync.model import ChangeReport, Chunk, ItemError, SourceItem
from kbsync.plan import (
    Action,
    DocumentVersion,
    Failed,
    Observation,
    Plan,
    StoredDocument,
    Unchanged,
    plan,
    text_key,
)
from kbsync.report import SyncResult
from kbsync.sources import Source
from kbsync.store import RecordStore, RunLog
from kbsync.sync.apply import apply_plan, count_plan, delete_documents, refuse_mass_deletion
from kbsync.sync.chunker import Chunker
from kbsync.sync.embedding import (
    backfill,
    cached_vectors,
    confirm_bill,
    count_reused,
    embed_plan,
    embedded_meta_name,
    refuse_dimension_change,
)
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
from kbsync.sync.reading import POOL_MIN_DOCUMENTS, Read, Readers, read_workers
from kbsync.sync.removed import RemovedSource, forget_released, keep_removed, removed_sources
from kbsync.sync.replacements import compare_stored, reports_change, screen
from kbsync.sync.scratch import Scratch
from kbsync.sync.tally import Progress, SourceTally, SyncReport, utc_now
from kbsync.vector_index import EmbeddedIndex, VectorIndex

__all__ = ["sync_sources"]


class _Added:
    """The digests new to documents of the batches done so far of one source: what a dry
    run, which caches nothing, takes as embedded by the time a later batch needs them.

    A digest can come back in a later batch only if more than one changed
    document holds it, so only those are kept, not every chunk of a first sync.
    """

    def __init__(self, recurring: set[str]) -> None:
        self._recurring = recurring
        self.digests: set[str] = set()

    def note(self, the_plan: Plan) -> None:
        self.digests.update(d for doc in the_plan.documents for d in doc.ops.added_digests
                            if d in self._recurring)


class _Counted:
    """Progress of a source's batches told as one count that goes on from batch to batch."""

    def __init__(self, progress: Progress | None) -> None:
        self._progress = progress
        self._before: Counter[str] = Counter()
        self._latest: dict[str, int] = {}

    def batch(self) -> Progress | None:
        """The progress callback of the next batch."""
        self._before.update(self._latest)
        self._latest = {}
        progress = self._progress
        if progress is None:
            return None

        def tick(stage: str, done: int, total: int) -> None:
            self._latest[stage] = total
            base = self._before[stage]
            progress(stage, base + done, base + total)

        return tick


@dataclass(frozen=True)
class _Run:
    """What every step of one sync shares."""

    store: RecordStore
    embedder: Embedder
    extractor_for: ExtractorFor
    chunker: Chunker
    options: SyncOptions
    progress: Progress | None
    index: VectorIndex
    clock: _Clock
    tally: Counter[ChunkShape]

    def count_chunk(self, chunk: Chunk) -> None:
        """Count ``chunk`` for the run's chunking diagnostics (its text is not kept)."""
        self.tally[shape_of(chunk)] += 1


class _Clock:
    def __init__(self, report: SyncReport) -> None:
        self.report = report
        self.mark = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.report.seconds[stage] = self.report.seconds.get(stage, 0.0) + now - self.mark
        self.mark = now


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
    store's through :class:`~kbsync.vector_index.MirroredIndex`).
    Documents are planned, embedded and applied a batch at a time, so memory does
    not grow with the size of a source (see :func:`_sync_source_steps`). A new
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
    run = _Run(store, embedder, extractor_for, chunker, options, progress=progress, index=index,
               clock=_Clock(report), tally=Counter())
    removed, released = removed_sources(store, sources, options.allow_mass_delete)
    for source in [*sources, *removed]:
        tally = SourceTally(source=source.name)
        report.sources.append(tally)
        if isinstance(source, RemovedSource):
            if source.name not in released:
                keep_removed(source, tally)
                continue
            tally.warnings.append("no longer configured: its documents are deleted")
        rewrite |= _sync_source(run, source,
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


def _record_interrupted(store: RunLog, report: SyncReport) -> None:
    """Record a run that stopped before its end, with what it did until then."""
    report.finished = utc_now()
    with contextlib.suppress(Exception):  # the store may be what failed: the cause goes on
        result = report.result()
        store.record_run(result.started, result.finished,
                         {**result.to_dict(), "interrupted": True})


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Within, SIGTERM stops the run as Ctrl-C does (a clean stop, recorded), not mid-write.

    Only in the main thread and only where nobody else handles SIGTERM.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("terminated (SIGTERM)")

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _sync_source(run: _Run, source: Source, allow_mass_delete: bool,
                 out: SourceTally) -> bool:
    """:func:`_sync_source_steps`, stopped by SIGTERM as by Ctrl-C; a run that stops there
    (either, a refusal, a store error) is recorded as interrupted before the error goes on."""
    try:
        with _sigterm_as_interrupt():
            return _sync_source_steps(run, source, allow_mass_delete, out)
    except BaseException:
        if not run.options.dry_run:
            _record_interrupted(run.store, run.clock.report)
        raise


def _sync_source_steps(run: _Run, source: Source, allow_mass_delete: bool,
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
    store = run.store
    rewrite = False
    with Scratch(run.options.scratch_dir) as scratch:
        derive = deriver(run.extractor_for, run.chunker)
        listed = list_source(source, store, derive, run.options.verify, scratch, out,
                             dry_run=run.options.dry_run,
                             due=run.options.due and not run.options.verify)
        run.clock.lap("list")
        stored = scratch.stored_count()
        _observe_source(run, source, scratch, derive, out)
        vanished = scratch.vanish() if listed.complete else 0
        if scratch.rechunked_count() or vanished:
            scratch.count_stored(store.chunk_digests(source.name))
            shared = scratch.boilerplate(run.options.boilerplate_share)
        else:
            shared = store.boilerplate(source.name)
        added = _Added(scratch.recurring() if run.options.dry_run else set())
        out.boilerplate_chunks = len(shared)
        skip = frozenset() if run.options.index_boilerplate else shared
        same_boilerplate = store.boilerplate(source.name) == skip
        # Whether every current chunk has its vector, as the last sync left it: then
        # nothing since has taken one away (a sync embeds what it applies), and the
        # query of every chunk against the cache is not needed, here or at the end.
        embedded = (not run.options.verify and same_boilerplate
                    and store.get_meta(embedded_meta_name(source.name)) == run.embedder.identity)
        if not run.options.dry_run:
            rewrite = not same_boilerplate
            store.set_boilerplate(source.name, skip)
        limit = run.options.confirm_above_tokens
        if limit is not None and not run.options.dry_run:
            confirm_bill(run.store, run.embedder, source.name, scratch, skip, limit,
                         embedded=embedded)
        counted = _Counted(run.progress)
        for batch in scratch.batches(run.options.batch.documents, run.options.batch.bytes):
            _run_batch(run, source.name, batch, scratch, skip, shared, added, out,
                       counted.batch())
        _delete_vanished(run, source.name, scratch, stored, allow_mass_delete, out)
        if not run.options.dry_run:
            keep_schedules(store, source.name, listed.revisited, out)
    if run.options.dry_run:
        if not embedded:
            out.embeddings_backfill = len(store.unembedded(source.name, run.embedder.identity))
        out.embeddings_to_compute += out.embeddings_backfill
        return False
    if not embedded and backfill(source.name, store, run.embedder, out):
        store.set_meta(embedded_meta_name(source.name), run.embedder.identity)
    run.clock.lap("apply")
    return rewrite or out.embeddings_backfill > 0


def _observe_source(run: _Run, source: Source, scratch: Scratch, derive: Derive,
                    out: SourceTally) -> None:
    """Gate every listed document; keep in ``scratch`` what each one came to, unless unchanged.

    What the stat gate passes with nothing to refresh is only counted, in one query.
    A listing error with a key means the document exists but cannot be taken now:
    it fails (and keeps its stored version). Documents to read go to a pool of
    reading processes when there are enough of them (:mod:`kbsync.sync.reading`).
    """
    total = scratch.listed_count() - count_unchanged(scratch, run.options.verify, out)
    workers = read_workers(run.options.read_workers)
    pooled = workers > 1 and total >= POOL_MIN_DOCUMENTS and _can_fork()
    with (Readers(workers, source, run.extractor_for, run.chunker) if pooled
          else contextlib.nullcontext()) as readers:
        for n, (entry, old) in enumerate(scratch.listing(skip_unchanged=not run.options.verify),
                                         1):
            if isinstance(entry, ItemError):
                scratch.observe(Failed(entry.key, entry.message, missing=entry.missing), old)
            else:
                _gate(run, source, entry, old, derive, out, scratch, readers)
            if run.progress is not None:
                run.progress("read", n, total)
        if readers is not None:
            readers.finish()
    run.clock.lap("read")


def _gate(run: _Run, source: Source, item: SourceItem, old: StoredDocument | None,
          derive: Derive, out: SourceTally, scratch: Scratch, readers: Readers | None) -> None:
    """One listed document: the stat gate here, else a read and gates 2 and 3 (by a reading
    process when there are ``readers``); what it comes to goes to ``scratch``."""
    made_with = derive(item.media_type)
    assert made_with is not None
    if not run.options.verify and stat_gate_passes(item, old, made_with):
        assert old is not None
        out.bytes_skipped += item.stat.size if item.stat else 0
        _keep(unchanged_observation(item, old), old, scratch, out)
        return
    if readers is not None:
        def done(read: Read) -> None:
            out.merge(read.tally)
            run.tally.update(read.shapes)
            _keep(read.observation, old, scratch, out)

        readers.read(item, old, made_with, done)
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


def _run_batch(
    run: _Run, source: str, batch: Sequence[tuple[Observation, StoredDocument | None]],
    scratch: Scratch, skip: frozenset[str], shared: frozenset[str], added: _Added,
    out: SourceTally, progress: Progress | None,
) -> None:
    """Plan, embed and apply one batch.

    The gone documents of ``scratch`` this batch moves from are offered no more;
    In a dry run ``added`` learns the digests new to this batch's documents, so that its
    counts and embedding estimate stay those of one plan of the whole source.
    """
    store, embedder = run.store, run.embedder
    olds = {old.key: old for _, old in batch if old is not None}
    observations, changes = _screen_replacements(run, source, [o for o, _ in batch], olds,
                                                 shared, out)
    versions = [o for o in observations if isinstance(o, DocumentVersion)]
    # Batches go in key order, as one plan of the source takes moves: a new document
    # moves from the first gone one with its text that no earlier key has taken.
    offered = scratch.origins([text_key(v) for v in versions if v.key not in olds])
    offered += scratch.gone_at([v.renamed_from for v in versions
                                if v.key not in olds and v.renamed_from is not None])
    filled = {d.key: d for d in store.with_digests(
        source, offered + [olds[v.key] for v in versions if v.key in olds])}
    local = {d.key: filled[d.key] for d in offered}
    for key, old in olds.items():
        local[key] = filled.get(key, old)
    pending = {c.digest for v in versions for c in v.chunks}
    cached = cached_vectors(store, embedder.identity, (c for v in versions for c in v.chunks),
                            skip, write=not run.options.dry_run)
    if run.options.dry_run:  # nothing is applied, so what earlier batches would embed is not cached
        cached |= pending & added.digests
    the_plan = plan(source, local, [o.key for o in observations], observations, cached,
                    skip=skip, delete=False)
    scratch.moved(local[d.previous_key] for d in the_plan.documents
                  if d.action is Action.MOVED and d.previous_key is not None)
    run.clock.lap("plan")
    tokens = {c.digest: c.tokens for v in versions for c in v.chunks}
    out.embedding_tokens += sum(tokens[d] for d in the_plan.to_embed)
    out.embeddings_to_compute += len(the_plan.to_embed)
    count_plan(out, the_plan.documents)
    for d in the_plan.documents:
        change = changes.get(d.key)
        if d.edited and d.version is not None and d.previous_key is not None:
            # Compared now, while the origin's text is still stored at its old key.
            change = compare_stored(store, source, d.version, local[d.previous_key], shared)
        if change is not None and reports_change(d):
            out.note_change(d.key, change)
    if not run.options.dry_run:
        vectors, failed = embed_plan(the_plan, embedder, out, progress,
                                     cache=store, keep=run.index.keeps_fresh_vectors,
                                     cache_seconds=run.options.batch.cache_seconds)
        run.clock.lap("embed")
        apply_plan(the_plan, vectors, failed, store, run.index, embedder, out, progress, skip)
        run.clock.lap("apply")
    else:
        count_reused(the_plan, out)
    if run.options.dry_run:
        added.note(the_plan)


def _screen_replacements(
    run: _Run, source: str, observations: list[Observation], olds: Mapping[str, StoredDocument],
    shared: frozenset[str], out: SourceTally,
) -> tuple[list[Observation], dict[str, ChangeReport]]:
    """Every observation screened (:func:`~kbsync.sync.replacements.screen`): those to plan
    (a held document becomes :class:`~kbsync.plan.Held`) and the change report of each one
    compared."""
    screened: list[Observation] = []
    changes: dict[str, ChangeReport] = {}
    for o in observations:
        seen = screen(run.store, source, o, olds.get(o.key), shared, out,
                      accept=run.options.accept_replacements, write=not run.options.dry_run)
        screened.append(seen.observation)
        if seen.change is not None and isinstance(o, DocumentVersion):
            changes[o.key] = seen.change
    return screened, changes


def _delete_vanished(run: _Run, source: str, scratch: Scratch, stored: int,
                     allow_mass_delete: bool, out: SourceTally) -> None:
    """Delete what vanished and moved nowhere, unless that needs consent (the one policy)."""
    if refuse_mass_deletion(out, stored, scratch.gone_count(), allow_mass_delete):
        return
    for page in scratch.gone(run.options.batch.documents):
        delete_documents(run.store, run.index, source, page, run.embedder, out, run.progress,
                         dry_run=run.options.dry_run)
