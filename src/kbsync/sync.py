"""The one orchestrator: gates, plan, embed the misses, apply, report.

It sees only protocols (Source, Extractor, RecordStore, Embedder) and the pure
core, so every part can be replaced by a fake from :mod:`kbsync.testing`.
A source goes through in batches of documents (:class:`BatchLimits`), so memory
does not grow with its size: nothing of a batch is written until its plan is
complete, and then the batch's documents in one transaction (each document in
its own when an external vector store needs the outbox protocol).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
import signal
import sys
import threading
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from kbsync.chunking import ChunkShape, TextChunker, shape_of
from kbsync.compare import WORD_REGIONS_LIMIT, compare, compare_long
from kbsync.embed import Embedder
from kbsync.embed.tokenizer import counter_for
from kbsync.errors import ConfigError, ConfirmationRequiredError, DocumentError, VectorStoreError
from kbsync.extract import Extractor
from kbsync.identity import digest, normalized_pieces_hash, source_bytes_hash
from kbsync.mirror import prepare, reconcile, replay_outbox, write_document
from kbsync.model import (
    ChangeReport,
    Chunk,
    ChunkingDiagnostics,
    ItemError,
    KnownItem,
    Listing,
    PageSchedule,
    Record,
    SourceItem,
    Verdict,
)
from kbsync.normalize import NORMALIZER_VERSION, canonical_pieces
from kbsync.plan import (
    Action,
    ChunkDraft,
    DocumentPlan,
    DocumentVersion,
    Failed,
    Observation,
    Plan,
    Refreshed,
    StoredDocument,
    Unchanged,
    mass_deletion,
    plan,
    text_key,
)
from kbsync.report import DocumentChange, SourceResult, SyncResult
from kbsync.scratch import Scratch
from kbsync.sources import Entries, Revisiting, Revisits, Scan, ScanningSource, Source
from kbsync.store import Frontier, RecordStore, Schedules
from kbsync.store.rows import held_meta_name
from kbsync.vectors import VectorSink

__all__ = [
    "EMBEDDER_COUNTER",
    "REPORT_LIMIT",
    "BatchLimits",
    "Capped",
    "Chunker",
    "Derive",
    "ExtractorFor",
    "Progress",
    "RemovedSource",
    "SourceReport",
    "SyncReport",
    "apply_plan",
    "backfill",
    "by_length",
    "compare_stored",
    "count_plan",
    "count_unchanged",
    "derivation",
    "deriver",
    "embed_plan",
    "erasure_matcher",
    "forget_held",
    "forget_released",
    "is_key_hash",
    "keep_removed",
    "list_source",
    "next_frontier",
    "observe",
    "refuse_dimension_change",
    "release_source",
    "released_sources",
    "removed_sources",
    "route_replacement",
    "stat_gate_passes",
    "sync_sources",
    "tombstone",
    "unchanged_observation",
    "utc_now",
]

Progress = Callable[[str, int, int], None]
ExtractorFor = Callable[[str], Extractor | None]
EMBED_BATCH = 64
EMBEDDED_PREFIX = "embedded "
"""Prefix of the meta entries of :func:`embedded_meta_name`."""


EMBEDDER_COUNTER = "embedder"
"""``[chunker] token_counter`` value that counts in the embedder's own tokens."""


@dataclass(frozen=True)
class Chunker:
    """The chunking settings of a knowledge base: a strategy and its parameters.

    ``embedder_counter`` is what ``token_counter = "embedder"`` stands for (the
    counter of the configured embedder, e.g. ``"tokenizer:<path>"``); the knowledge
    base sets it when it builds its embedder.
    """

    strategy: str = "tttd"
    params: Mapping[str, Any] = field(default_factory=dict)
    embedder_counter: str = ""

    @property
    def counts_in_embedder_tokens(self) -> bool:
        return self.params.get("token_counter") == EMBEDDER_COUNTER

    def validate(self) -> None:
        """Check the settings; before the embedder is known, the estimate stands in for it."""
        stand_in = self.embedder_counter or "estimate"
        replace(self, embedder_counter=stand_in).text_chunker()

    def settings(self) -> dict[str, Any]:
        """The chunker's parameters with ``token_counter = "embedder"`` resolved."""
        params = dict(self.params)
        if self.counts_in_embedder_tokens:
            if not self.embedder_counter:
                raise ConfigError('[chunker] token_counter = "embedder" needs the embedder: '
                                  "build the chunker through the knowledge base")
            params["token_counter"] = self.embedder_counter
        return params

    def text_chunker(self) -> TextChunker:
        """The validated chunker (built once per settings)."""
        return _text_chunker(self.strategy, json.dumps(self.settings(), sort_keys=True))

    @property
    def fingerprint(self) -> str:
        """What a document's derivation commits to besides its extractor."""
        return self.text_chunker().params_hash

    def chunks(self, text: str) -> tuple[Chunk, ...]:
        return tuple(self.text_chunker().chunks([text]))


@lru_cache(maxsize=16)
def _text_chunker(strategy: str, params: str) -> TextChunker:
    settings = json.loads(params)
    counter = counter_for(str(settings.get("token_counter", "")))
    return TextChunker(strategy, counter=counter, **settings)


REPORT_LIMIT = 10_000
"""How many changed documents, failures and warnings (each) a source's report names.

Counts stay exact. Beyond this a report, and so a sync's memory, would grow with
the source: a first sync of a million pages would name a million documents.
"""

T = TypeVar("T")


class Capped(list[T]):
    """A list that keeps its first :data:`REPORT_LIMIT` items and counts the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.omitted = 0

    def append(self, item: T) -> None:
        if len(self) < REPORT_LIMIT:
            super().append(item)
        else:
            self.omitted += 1

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)


@dataclass(slots=True)
class SourceReport:
    """What one sync (or plan) has done so far to one source (frozen by :meth:`result`)."""

    source: str
    documents: Counter[str] = field(default_factory=Counter)
    chunks: Counter[str] = field(default_factory=Counter)
    bytes_read: int = 0
    bytes_skipped: int = 0
    skipped: int = 0
    embeddings_computed: int = 0
    embeddings_to_compute: int = 0
    embeddings_reused: int = 0
    embed_tokens: int = 0
    embeddings_truncated: int = 0
    embeddings_backfill: int = 0
    boilerplate: int = 0
    vectors_upserted: int = 0
    vectors_deleted: int = 0
    failures: Capped[tuple[str, str]] = field(default_factory=Capped)
    warnings: Capped[str] = field(default_factory=Capped)
    actions: Capped[tuple[str, str, str | None]] = field(default_factory=Capped)
    """``(key, action, moved from)`` of each document the run changed."""
    changes: dict[str, ChangeReport] = field(default_factory=dict)
    listing_complete: bool = True
    deletions_blocked: bool = False
    erased: int = 0
    applied: int = 0
    pages_checked: int | None = None
    """Pages a revisiting source requested (None for other sources)."""
    pages_not_due: int = 0
    revisits: _Revisited | None = None

    def _truncation(self) -> tuple[str, ...]:
        """The warning of a run that embedded chunks past the model's window, if it did."""
        n = self.embeddings_truncated
        if not n:
            return ()
        chunks = "chunk was" if n == 1 else "chunks were"
        return (f"{n:,} {chunks} longer than the embedder's input window and embedded "
                "truncated (their ends are found by text search only); a lower [chunker] "
                "max_tokens avoids it",)

    def result(self) -> SourceResult:
        """The frozen report of this source."""
        return SourceResult(
            source=self.source, documents=Counter(self.documents), chunks=Counter(self.chunks),
            bytes_read=self.bytes_read, bytes_skipped=self.bytes_skipped,
            skipped_unsupported=self.skipped, embeddings_computed=self.embeddings_computed,
            embeddings_reused=self.embeddings_reused, embedding_tokens=self.embed_tokens,
            embeddings_truncated=self.embeddings_truncated,
            embeddings_backfill=self.embeddings_backfill, boilerplate_chunks=self.boilerplate,
            vectors_upserted=self.vectors_upserted, vectors_deleted=self.vectors_deleted,
            listing_complete=self.listing_complete, deletions_blocked=self.deletions_blocked,
            failures=tuple(self.failures), warnings=tuple(self.warnings) + self._truncation(),
            changes=tuple(DocumentChange(k, a, self.changes.get(k), origin)
                          for k, a, origin in self.actions),
            omitted={name: n for name, n in (("changes", self.actions.omitted),
                                              ("failures", self.failures.omitted),
                                              ("warnings", self.warnings.omitted)) if n},
            skipped_erased=self.erased,
            embeddings_to_compute=self.embeddings_to_compute, documents_applied=self.applied,
            pages_checked=self.pages_checked, pages_not_due=self.pages_not_due)


@dataclass(frozen=True, slots=True)
class _Revisited:
    """A revisiting source's schedules after its listing, and the store's before it."""

    revisits: Revisits
    before: Mapping[str, PageSchedule]
    complete: bool


@dataclass(slots=True)
class SyncReport:
    """What one run has done so far: per source, stage times and chunking diagnostics.

    The orchestrator fills it in as it goes; :meth:`result` freezes it.
    """

    dry_run: bool
    started: str
    finished: str = ""
    sources: list[SourceReport] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    diagnostics: ChunkingDiagnostics | None = None
    embedder: str = ""

    def result(self) -> SyncResult:
        """The frozen report, with a count for every document action."""
        return SyncResult(
            dry_run=self.dry_run, started=self.started, finished=self.finished,
            documents={a.value: sum(s.documents[a.value] for s in self.sources) for a in Action},
            seconds=dict(self.seconds), diagnostics=self.diagnostics,
            sources=tuple(s.result() for s in self.sources), embedder=self.embedder)


def utc_now() -> str:
    """Now, in UTC, to the second: the time stamp of runs and records."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class BatchLimits:
    """How much of a source's changed documents a sync holds at once.

    A batch closes at ``documents`` documents or once the versions read for it
    (text and chunks) reach ``bytes``; a single larger document is a batch of its own.
    """

    documents: int = 256
    bytes: int = 16 * 2**20


class _Added:
    """The digests new to documents of the batches done so far of one source.

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
    dry_run: bool
    verify: bool
    progress: Progress | None
    boilerplate_share: float
    index_boilerplate: bool
    sink: VectorSink | None
    batch: BatchLimits
    scratch_dir: Path | None
    clock: _Clock
    tally: Counter[ChunkShape]
    accept_replacements: bool = False
    confirm_above: int | None = None
    due: bool = False

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
    *,
    dry_run: bool = False,
    verify: bool = False,
    allow_mass_delete: bool = False,
    progress: Progress | None = None,
    boilerplate_share: float = 0.05,
    index_boilerplate: bool = False,
    sink: VectorSink | None = None,
    batch: BatchLimits = BatchLimits(),
    scratch_dir: Path | None = None,
    accept_replacements: bool = False,
    confirm_above_tokens: int | None = None,
    due: bool = False,
) -> SyncResult:
    """Bring ``store`` in step with ``sources`` (or, with ``dry_run``, only plan it).

    With ``due``, a revisiting source (a website) checks only the pages whose
    revisit schedule says they are due (:mod:`kbsync.schedule`); the others are
    unchanged, never deleted for not being checked. ``verify`` checks every page.

    A source whose chunks to embed (cache misses) come to more than
    ``confirm_above_tokens`` tokens raises :class:`~kbsync.errors.ConfirmationRequiredError`
    before any of it is embedded or written (None: no bound). A run that stops
    (that error, Ctrl-C, SIGTERM, a store error) is recorded as interrupted, with
    what it applied; every embedding computed is in the cache already.

    Chunks found in more than ``boilerplate_share`` of a host's documents are
    boilerplate: unless ``index_boilerplate``, they are neither embedded nor searched.
    With a ``sink`` (an external vector store), each document's vectors are
    written there as well, in the order of :func:`kbsync.mirror.write_document`.
    Documents are planned, embedded and applied a ``batch`` at a time, so memory
    does not grow with the size of a source (see :func:`_sync_source`); the
    documents read wait for their batch in a scratch file in ``scratch_dir`` (the system's
    temporary directory when None). A new text that shares almost nothing with
    the stored one (a re-examine verdict) is held until a later sync sees it
    again, unless ``accept_replacements`` (see :func:`route_replacement`).
    """
    refuse_dimension_change(store, embedder)
    report = SyncReport(dry_run=dry_run, started=utc_now(), embedder=embedder.identity)
    # Changes that touch vectors of documents the plan leaves alone (a rebuilt
    # collection, boilerplate coming or going, a backfill) end in one reconciliation.
    mirror_all = False
    if sink is not None and not dry_run:
        replay_outbox(store, sink)
        mirror_all = prepare(sink, embedder.dimension)
    run = _Run(store, embedder, extractor_for, chunker, dry_run=dry_run, verify=verify,
               progress=progress, boilerplate_share=boilerplate_share,
               index_boilerplate=index_boilerplate, sink=sink, batch=batch, scratch_dir=scratch_dir,
               clock=_Clock(report), tally=Counter(), accept_replacements=accept_replacements,
               confirm_above=confirm_above_tokens, due=due)
    removed, released = removed_sources(store, sources, allow_mass_delete)
    for source in [*sources, *removed]:
        source_report = SourceReport(source=source.name)
        report.sources.append(source_report)
        if isinstance(source, RemovedSource):
            if source.name not in released:
                keep_removed(source.name, source_report)
                continue
            source_report.warnings.append("no longer configured: its documents are deleted")
        mirror_all |= _sync_source(run, source,
                                   allow_mass_delete or isinstance(source, RemovedSource),
                                   source_report)
    if sink is not None and mirror_all:
        reconcile(store, sink, embedder.identity, embedder.dimension, repair=True)
    report.diagnostics = chunker.text_chunker().diagnose_tally(run.tally)
    report.finished = utc_now()
    result = report.result()
    if not dry_run:
        store.set_meta("chunker", chunker.fingerprint)
        store.set_meta("embedder", embedder.identity)
        forget_released(store, released | {s.name for s in sources})
        store.record_run(result.started, result.finished, result.to_dict())
    return result


REMOVED_META = "removed_sources"
"""The store's meta entry naming the sources `kbsync sources remove` released for deletion."""


def removed_sources(store: RecordStore, sources: Sequence[Source], allow_mass_delete: bool,
                    ) -> tuple[list[RemovedSource], frozenset[str]]:
    """The stored sources no longer configured, and those of them whose documents may go.

    A source that is simply absent from the configuration may be a typo (``[[source]]``)
    or a mangled file: its documents stay until ``kbsync sources remove`` releases it
    (:func:`release_source`) or the sync is run with ``allow_mass_delete``.
    """
    configured = {s.name for s in sources}
    names = sorted(store.source_names() - configured)
    if allow_mass_delete:
        return [RemovedSource(n) for n in names], frozenset(names)
    return [RemovedSource(n) for n in names], frozenset(released_sources(store)) - configured


def released_sources(store: RecordStore) -> list[str]:
    """The names `kbsync sources remove` released whose documents no sync has deleted yet."""
    value = store.get_meta(REMOVED_META)
    names = json.loads(value) if value else []
    return [str(n) for n in names] if isinstance(names, list) else []


def release_source(store: RecordStore, name: str) -> None:
    """Let the next sync delete the documents of ``name`` once it is no longer configured."""
    names = released_sources(store)
    if name not in names:
        store.set_meta(REMOVED_META, json.dumps(sorted([*names, name])))


def forget_released(store: RecordStore, settled: Collection[str]) -> None:
    """Sources a sync has deleted, or that are configured again, need no release any more."""
    names = released_sources(store)
    if names and set(names) & set(settled):
        store.set_meta(REMOVED_META, json.dumps([n for n in names if n not in settled]))


def keep_removed(name: str, out: SourceReport) -> None:
    """Report a stored source missing from the configuration, whose documents are kept."""
    out.deletions_blocked = True
    out.failures.append(("", f"a stored source that is no longer configured in kbsync.toml; "
                             f"its documents were kept (`kbsync sources remove {name}` or "
                             "`kbsync sync --allow-mass-delete` deletes them)"))


def _record_interrupted(store: RecordStore, report: SyncReport) -> None:
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


class RemovedSource:
    """A source that has documents in the store but is no longer configured: it lists nothing."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        return Listing(())

    def read(self, item: SourceItem) -> bytes:
        raise DocumentError(item.locator, "its source is no longer configured")


def backfill(source: str, store: RecordStore, embedder: Embedder, out: SourceReport) -> bool:
    """Embed current chunks that have no vector for this embedder; whether all have now.

    That happens when the embedder changes (unchanged documents keep their chunks
    but need new vectors) and when a chunk stops being boilerplate.
    """
    missing = store.unembedded(source, embedder.identity)
    if not missing:
        return True
    before = out.embeddings_computed
    out.embeddings_to_compute += len(missing)
    _, failed = _embed_texts(embedder, list(missing), missing, out, None, store, keep=False)
    out.embeddings_backfill = out.embeddings_computed - before
    return not failed


def refuse_dimension_change(store: RecordStore, embedder: Embedder) -> None:
    """The same model id with another dimension would mix vectors that cannot be compared."""
    model = embedder.identity.rsplit(":", 1)[0]
    for identity, dimension in store.embedder_dimensions().items():
        if identity.rsplit(":", 1)[0] == model and dimension != embedder.dimension:
            raise ConfigError(
                f"the embedder {model} now gives {embedder.dimension}-dimensional vectors, but "
                f"the store holds {dimension}-dimensional ones under the same model id; "
                "give the model a new name or `kbsync erase '*'` and sync again"
            )


def _sync_source(run: _Run, source: Source, allow_mass_delete: bool,
                 out: SourceReport) -> bool:
    """:func:`_sync_source_steps`, stopped by SIGTERM as by Ctrl-C; a run that stops there
    (either, a refusal, a store error) is recorded as interrupted before the error goes on."""
    try:
        with _sigterm_as_interrupt():
            return _sync_source_steps(run, source, allow_mass_delete, out)
    except BaseException:
        if not run.dry_run:
            _record_interrupted(run.store, run.clock.report)
        raise


def _sync_source_steps(run: _Run, source: Source, allow_mass_delete: bool,
                       out: SourceReport) -> bool:
    """List, observe, then plan, embed and apply one source a batch at a time.

    Whether a document is boilerplate depends on every document of the source,
    and it must be known before anything is embedded. So the changed documents
    are read, extracted and chunked first, and only then planned, embedded and
    applied, a batch at a time. What that needs of every document (the listing,
    the store's manifest, each observation and the chunk digests) waits in a
    :class:`~kbsync.scratch.Scratch` file, so memory does not grow with the
    source. Deletions wait for the last batch, which may have moved a vanished
    document. Returns whether the sink needs a reconciliation.
    """
    store = run.store
    mirror = False
    with Scratch(run.scratch_dir) as scratch:
        derive = deriver(run.extractor_for, run.chunker)
        complete = list_source(source, store, derive, run.verify, scratch, out,
                               dry_run=run.dry_run, due=run.due and not run.verify)
        run.clock.lap("list")
        stored = scratch.stored_count()
        _observe_source(run, source, scratch, derive, out)
        vanished = scratch.vanish() if complete else 0
        if scratch.rechunked_count() or vanished:
            scratch.count_stored(store.chunk_digests(source.name))
            shared = scratch.boilerplate(run.boilerplate_share)
        else:
            shared = store.boilerplate(source.name)
        added = _Added(scratch.recurring())
        out.boilerplate = len(shared)
        skip = frozenset() if run.index_boilerplate else shared
        same_boilerplate = store.boilerplate(source.name) == skip
        # Whether every current chunk has its vector, as the last sync left it: then
        # nothing since has taken one away (a sync embeds what it applies), and the
        # query of every chunk against the cache is not needed, here or at the end.
        embedded = (not run.verify and same_boilerplate
                    and store.get_meta(embedded_meta_name(source.name)) == run.embedder.identity)
        if not run.dry_run:
            mirror = run.sink is not None and not same_boilerplate
            store.set_boilerplate(source.name, skip)
        if run.confirm_above is not None and not run.dry_run:
            _confirm_bill(run, source.name, scratch, skip, run.confirm_above, embedded)
        counted = _Counted(run.progress)
        for batch in scratch.batches(run.batch.documents, run.batch.bytes):
            _run_batch(run, source.name, batch, scratch, skip, shared, added, out,
                       counted.batch())
        _delete_vanished(run, source.name, scratch, stored, allow_mass_delete, out)
        if not run.dry_run:
            keep_schedules(store, source.name, out)
    if run.dry_run:
        if not embedded:
            out.embeddings_backfill = len(store.unembedded(source.name, run.embedder.identity))
        out.embeddings_to_compute += out.embeddings_backfill
        return False
    if not embedded and backfill(source.name, store, run.embedder, out):
        store.set_meta(embedded_meta_name(source.name), run.embedder.identity)
    run.clock.lap("apply")
    return mirror or out.embeddings_backfill > 0


def embedded_meta_name(source: str) -> str:
    """The store's meta entry naming the embedder that every current chunk of ``source``
    had a vector for when the last sync of it ended (``sync --verify`` checks again)."""
    return EMBEDDED_PREFIX + source


def _confirm_bill(run: _Run, source: str, scratch: Scratch, skip: frozenset[str],
                  limit: int, embedded: bool) -> None:
    """Refuse, before anything of the source is embedded, a bill over ``limit`` tokens.

    The bill is the tokens of the chunks read in this run that are neither cached
    nor boilerplate, and of the stored chunks that have no vector for this embedder
    (a new embedder re-embeds every document); the cache is asked about the first
    only when all of them together exceed it. ``embedded`` says the stored chunks
    all have their vector (:func:`embedded_meta_name`).
    """
    missing = {} if embedded else run.store.unembedded(source, run.embedder.identity)
    chunks = len(missing)
    tokens = sum(run.embedder.count_tokens(list(missing.values()))) if missing else 0
    if scratch.fresh_tokens() + tokens <= limit:
        return
    for page in scratch.fresh_chunks():
        cached = run.store.cached(run.embedder.identity, [d for d, _ in page])
        for d, n in page:
            if d not in cached and d not in skip and d not in missing:
                chunks += 1
                tokens += n
    if tokens > limit:
        raise ConfirmationRequiredError(
            f"source {source}: this sync would embed {chunks:,} chunks ({tokens:,} tokens), "
            f"over [index] confirm_above_tokens = {limit:,}; nothing of it was embedded or "
            "written. See what with `kbsync plan`, or sync with --yes")


_MANIFEST_PAGE = 1000


def list_source(source: Source, store: RecordStore, derive: Derive, verify: bool,
                scratch: Scratch, out: SourceReport, *, dry_run: bool = False,
                due: bool = False) -> bool:
    """Put the source's listing and the store's manifest of it in ``scratch``; whether complete.

    An item no extractor reads is not a document of the knowledge base (a page that
    became an image): it is left out, so a stored one is deleted like a vanished one.
    So is an item whose key an erasure (``kbsync erase``) covers: it is counted in
    ``out.erased`` and never read, so a sync does not bring it back. A
    :class:`~kbsync.sources.Revisiting` source is handed each page's schedule,
    and with ``due`` lists only the pages due (see :func:`keep_schedules`).
    """
    erased = erasure_matcher(store.erasures())
    if isinstance(source, ScanningSource):
        scan = Scan(source.scan())
    else:  # a source that needs what the store knows (validators) holds its listing anyway
        # --verify also revalidates web pages in full: no validators, so no 304 shortcut.
        revisiting = source if isinstance(source, Revisiting) else None
        schedules = store if isinstance(store, Schedules) else None
        before = (schedules.schedules(source.name)
                  if revisiting is not None and schedules is not None else {})
        known = {k: KnownItem(k, d.stat, None if verify else d.validators, d.missing,
                              schedule=before.get(k))
                 for k, d in store.manifest(source.name).items()}
        pending = (store.frontier(source.name) - known.keys()
                   if isinstance(store, Frontier) else frozenset())
        asked = {**known, **{k: KnownItem(k, pending=True) for k in pending}}
        if revisiting is not None and due:
            listing = revisiting.list_due(asked)
        else:
            listing = source.list(asked)
        if revisiting is not None:
            revisits = revisiting.revisits
            out.pages_checked, out.pages_not_due = revisits.checked, revisits.not_due
            if erased is not None:  # an erased page leaves nothing behind, its schedule included
                revisits = replace(revisits, schedules={
                    k: v for k, v in revisits.schedules.items() if not erased(k)})
            out.revisits = _Revisited(revisits, before, listing.complete)
        if isinstance(store, Frontier) and not dry_run:
            store.set_frontier(source.name, next_frontier(listing, known.keys(), pending))
        scan = Scan(_entries(listing))
    page: list[tuple[SourceItem | ItemError, str]] = []
    for entry in scan:
        if erased is not None and entry.key and erased(entry.key):
            out.erased += 1
        elif isinstance(entry, ItemError):
            if entry.key:
                page.append((entry, ""))
            else:
                out.failures.append(("", entry.message))
        elif (derivation := derive(entry.media_type)) is None:
            out.skipped += 1
        else:
            page.append((entry, derivation))
        if len(page) == _MANIFEST_PAGE:
            scratch.add_listed(page)
            page.clear()
    scratch.add_listed(page)
    summary = scan.summary
    out.listing_complete = summary.complete
    out.warnings.extend(summary.warnings)
    out.failures.extend(("", e.message) for e in summary.errors)
    after = None
    while page_of_stored := store.manifest(source.name, after, _MANIFEST_PAGE):
        scratch.add_stored(page_of_stored.values())
        after = next(reversed(page_of_stored))
    return summary.complete


def keep_schedules(store: RecordStore, source: str, out: SourceReport) -> None:
    """Store the revisit schedules of the source's latest listing, once its changes are applied.

    A page that failed to sync keeps the schedule it had (so it is not left
    alone longer for having failed); an incomplete listing replaces nothing.
    """
    revisited = out.revisits
    if revisited is None or not isinstance(store, Schedules):
        return
    failed = {key for key, _ in out.failures if key}
    before = revisited.before
    schedules = {k: before[k] if k in failed and k in before else v
                 for k, v in revisited.revisits.schedules.items()
                 if k not in failed or k in before}
    store.set_schedules(source, schedules, replace=revisited.complete)


def next_frontier(listing: Listing, stored: Collection[str],
                  pending: Collection[str]) -> frozenset[str]:
    """The keys to try again next time: those that failed here and the store does not hold.

    A key that failed before and is listed now stays until the store holds it (the
    sync may stop before it is applied); one that failed before and is absent from
    a complete listing is forgotten (gone, out of scope, disallowed), and so is one
    that was found missing twice in a row (an HTTP 404 confirmed). An incomplete
    listing forgets nothing.
    """
    was = frozenset(pending)
    failed = {e.key for e in listing.errors
              if e.key and e.key not in stored and not (e.missing and e.key in was)}
    listed = {i.key for i in listing.items} & was
    return frozenset(failed | listed | (set() if listing.complete else was))


_GLOB = re.compile(r"[*?\[]")
_KEY_HASH = "blake2b:"


def tombstone(pattern: str) -> str:
    """What the store keeps of an erasure: a glob as given, an exact key only as its hash.

    Erasure leaves no byte of an erased document in the store, its key included; a
    glob is kept as typed (it is needed to match), so it is the user's to word.
    """
    if _GLOB.search(pattern):
        return pattern
    return _KEY_HASH + digest("kbsync:erased-key", pattern)


def is_key_hash(stored: str) -> bool:
    """Whether a tombstone as stored is the hash of an exact key (not a glob)."""
    return stored.startswith(_KEY_HASH) and not _GLOB.search(stored)


def erasure_matcher(erasures: Iterable[tuple[str, str]]) -> Callable[[str], bool] | None:
    """Whether a key is covered by the tombstones ``(stored, created)``; None without any.

    Globs are those of ``kbsync erase``: shell-style and case-sensitive, as
    :func:`fnmatch.fnmatchcase` reads them; exact keys are compared by hash.
    """
    stored = [s for s, _ in erasures]
    hashes = {s for s in stored if is_key_hash(s)}
    globs = [f"(?:{fnmatch.translate(s)})" for s in stored if s not in hashes]
    regex = re.compile("|".join(globs)) if globs else None
    if regex is None and not hashes:
        return None

    def covers(key: str) -> bool:
        return (regex is not None and regex.match(key) is not None) or (
            bool(hashes) and tombstone(key) in hashes)

    return covers


Derive = Callable[[str], str | None]
"""The derivation a document of a media type is read with; None when no extractor reads it."""


def deriver(extractor_for: ExtractorFor, chunker: Chunker) -> Derive:
    """:data:`Derive` for these extractors and chunker: what a stored version was made with.

    A stored version whose derivation differs must be read again, whatever its stat.
    """
    @cache
    def derive(media_type: str) -> str | None:
        extractor = extractor_for(media_type)
        return None if extractor is None else derivation(chunker, extractor.identity)

    return derive


def derivation(chunker: Chunker, extractor_identity: str) -> str:
    """What a version is made with: the normalizer, the chunker and the extractor."""
    return digest("kbsync:derivation", NORMALIZER_VERSION, chunker.fingerprint,
                  extractor_identity)


def _entries(listing: Listing) -> Entries:
    """A whole listing handed over as :data:`~kbsync.sources.Entries`."""
    yield from listing.items
    yield from listing.errors
    return Listing((), listing.complete, (), listing.warnings)


def _observe_source(run: _Run, source: Source, scratch: Scratch, derive: Derive,
                    out: SourceReport) -> None:
    """Gate every listed document; keep in ``scratch`` what each one came to, unless unchanged.

    What the stat gate passes with nothing to refresh is only counted, in one query.
    A listing error with a key means the document exists but cannot be taken now:
    it fails (and keeps its stored version).
    """
    total = scratch.listed_count() - count_unchanged(scratch, run.verify, out)
    for n, (entry, old) in enumerate(scratch.listing(skip_unchanged=not run.verify), 1):
        if isinstance(entry, ItemError):
            scratch.observe(Failed(entry.key, entry.message, missing=entry.missing), old)
        else:
            seen = _gate(run, source, entry, old, derive, out)
            if isinstance(seen, Unchanged):
                out.documents[str(Action.UNCHANGED)] += 1
            else:
                scratch.observe(seen, old)
        if run.progress is not None:
            run.progress("read", n, total)
    run.clock.lap("read")


def _gate(run: _Run, source: Source, item: SourceItem, old: StoredDocument | None,
          derive: Derive, out: SourceReport) -> Observation:
    """What one listed document comes to: the stat gate, else a read and gates 2 and 3."""
    extractor = run.extractor_for(item.media_type)
    made_with = derive(item.media_type)
    assert extractor is not None
    assert made_with is not None
    if not run.verify and stat_gate_passes(item, old, made_with):
        assert old is not None
        out.bytes_skipped += item.stat.size if item.stat else 0
        return unchanged_observation(item, old)
    return observe(source, item, old, extractor, made_with, run.chunker, out, run.count_chunk)


def stat_gate_passes(item: SourceItem, old: StoredDocument | None, made_with: str) -> bool:
    """Gate 1: the stored version was made the same way and the source says it is the same
    (its stat, or an HTTP 304), so the document is not read at all."""
    return old is not None and old.derivation == made_with and (
        item.not_modified or (item.stat is not None and old.stat == item.stat))


def count_unchanged(scratch: Scratch, verify: bool, out: SourceReport) -> int:
    """Count in ``out`` what ``scratch`` settles as unchanged in one query; how many.

    ``verify`` reads everything again: then nothing is settled without a read.
    """
    unchanged, size = (0, 0) if verify else scratch.unchanged()
    out.documents[str(Action.UNCHANGED)] += unchanged
    out.bytes_skipped += size
    return unchanged


def _run_batch(
    run: _Run, source: str, batch: Sequence[tuple[Observation, StoredDocument | None]],
    scratch: Scratch, skip: frozenset[str], shared: frozenset[str], added: _Added,
    out: SourceReport, progress: Progress | None,
) -> None:
    """Plan, embed and apply one batch.

    The gone documents of ``scratch`` this batch moves from are offered no more;
    ``added`` learns the digests new to this batch's documents, so that counts
    and a dry run's embedding estimate stay those of one plan of the whole source.
    """
    store, embedder = run.store, run.embedder
    olds = {old.key: old for _, old in batch if old is not None}
    observations, changes = _screen_replacements(run, source, [o for o, _ in batch], olds,
                                                 shared, out)
    versions = [o for o in observations if isinstance(o, DocumentVersion)]
    # Batches go in key order, as one plan of the source takes moves: a new document
    # moves from the first gone one with its text that no earlier key has taken.
    offered = scratch.origins([text_key(v) for v in versions if v.key not in olds])
    filled = {d.key: d for d in store.with_digests(
        source, offered + [olds[v.key] for v in versions if v.key in olds])}
    local = {d.key: filled[d.key] for d in offered}
    for key, old in olds.items():
        local[key] = filled.get(key, old)
    pending = {c.digest for v in versions for c in v.chunks}
    cached = store.cached(embedder.identity, pending) if pending else set()
    if run.dry_run:  # nothing is applied, so what earlier batches would embed is not cached
        cached |= pending & added.digests
    the_plan = plan(source, local, [o.key for o in observations], observations, cached,
                    skip=skip, delete=False)
    scratch.moved(local[d.previous_key] for d in the_plan.documents
                  if d.action is Action.MOVED and d.previous_key is not None)
    run.clock.lap("plan")
    tokens = {c.digest: c.tokens for v in versions for c in v.chunks}
    out.embed_tokens += sum(tokens[d] for d in the_plan.to_embed)
    out.embeddings_to_compute += len(the_plan.to_embed)
    count_plan(out, the_plan.documents)
    for d in the_plan.documents:
        if d.action is Action.MODIFIED and d.version is not None \
                and len(out.changes) < REPORT_LIMIT:
            change = changes.get(d.key)
            if change is not None:
                out.changes[d.key] = change
    if not run.dry_run:
        vectors, failed = embed_plan(the_plan, embedder, out, progress, added.digests,
                                     cache=store, keep=run.sink is not None)
        run.clock.lap("embed")
        apply_plan(the_plan, vectors, failed, store, embedder, out, progress, run.sink, skip)
        run.clock.lap("apply")
    else:
        count_reused(the_plan, added.digests, out)
    added.note(the_plan)


def _screen_replacements(
    run: _Run, source: str, observations: list[Observation], olds: Mapping[str, StoredDocument],
    shared: frozenset[str], out: SourceReport,
) -> tuple[list[Observation], dict[str, ChangeReport]]:
    """Compare every document whose text changed with its stored text; hold collapsed ones.

    Returns the observations to plan (a held document becomes :class:`Unchanged`)
    and the change report of each document compared.
    """
    screened: list[Observation] = []
    changes: dict[str, ChangeReport] = {}
    for o in observations:
        change = compare_stored(run.store, source, o, olds.get(o.key), shared)
        if change is None or not isinstance(o, DocumentVersion):
            if o.key in olds and not isinstance(o, Failed) and not run.dry_run:
                forget_held(run.store, source, o.key)  # read again: it has its stored text
            screened.append(o)
            continue
        changes[o.key] = change
        screened.append(route_replacement(run.store, source, o, change, out,
                                          accept=run.accept_replacements,
                                          write=not run.dry_run))
    return screened, changes


def compare_stored(store: RecordStore, source: str, observation: Observation,
                   old: StoredDocument | None, shared: Collection[str]) -> ChangeReport | None:
    """The change report of a document whose text changed against its stored text, else None.

    Chunks in ``shared`` (the source's boilerplate) do not count in the similarity.
    """
    if not isinstance(observation, DocumentVersion) or old is None \
            or observation.text_hash == old.text_hash:
        return None
    if len(observation.text) > WORD_REGIONS_LIMIT:
        return compare_long(store.text_pieces(source, observation.key), [observation.text])
    before = store.document(observation.key, source, previous=False)
    if before is None:
        return None
    noise = {c.text for c in observation.chunks if c.digest in shared}
    return compare(before.text, observation.text, ignore=noise)


def forget_held(store: RecordStore, source: str, key: str) -> None:
    """Drop the replacement held for a document that came back to its stored text: a
    later collapse of it must be seen twice again before it is applied."""
    name = held_meta_name(source, key)
    if store.get_meta(name):
        store.set_meta(name, "")


def route_replacement(store: RecordStore, source: str, version: DocumentVersion,
                      change: ChangeReport, out: SourceReport, *, accept: bool,
                      write: bool) -> Observation:
    """Route a changed document by its verdict: hold a collapsed text, else let it through.

    A re-examine verdict (the new text shares almost nothing with the stored one:
    a login wall, an error page served with 200, an extractor regression) keeps
    the stored version, with its stat, so the next sync reads the document again;
    the new text is applied when that sync sees the same text (same hash), or at
    once with ``accept``. The hash awaiting confirmation is a meta entry of the
    store (:func:`~kbsync.store.rows.held_meta_name`), so it survives restarts; ``write`` false (a
    dry run) leaves it alone.
    """
    name = held_meta_name(source, version.key)
    held = store.get_meta(name) or None
    if change.verdict is not Verdict.REEXAMINE_EXTRACTION:
        if held and write:
            store.set_meta(name, "")
        return version
    if accept or held == version.text_hash:
        if held and write:
            store.set_meta(name, "")
        how = "accepted" if accept else "confirmed by a second check"
        out.warnings.append(f"{version.key}: new text shares almost nothing with the previous "
                            f"one (similarity {change.similarity:.3f}); replacement {how}")
        return version
    if write:
        store.set_meta(name, version.text_hash)
    out.warnings.append(f"{version.key}: new text shares almost nothing with the previous one "
                        f"(similarity {change.similarity:.3f}); kept the previous version until "
                        "the next sync sees the same text (or sync with --accept-replacements)")
    return Unchanged(version.key)


def _delete_vanished(run: _Run, source: str, scratch: Scratch, stored: int,
                     allow_mass_delete: bool, out: SourceReport) -> None:
    """Delete what vanished and moved nowhere, unless that is more than half of the source."""
    gone = scratch.gone_count()
    if not gone:
        return
    if not allow_mass_delete and mass_deletion(stored, gone):
        out.deletions_blocked = True
        out.failures.append(("", "more than half of this source's documents would be deleted; "
                                 "nothing was deleted (use --allow-mass-delete)"))
        return
    for page in scratch.gone(run.batch.documents):
        docs = {d.key: d for d in run.store.with_digests(source, page)}
        the_plan = plan(source, docs, [], [], allow_mass_delete=True)
        count_plan(out, the_plan.documents)
        if not run.dry_run:
            apply_plan(the_plan, {}, set(), run.store, run.embedder, out, run.progress, run.sink)


def count_plan(out: SourceReport, docs: Collection[DocumentPlan]) -> None:
    """Add what a plan does to each document (its action, its chunk operations) to ``out``."""
    for d in docs:
        out.documents[str(d.action)] += 1
        out.chunks["kept"] += d.ops.kept
        out.chunks["moved"] += d.ops.moved
        out.chunks["added"] += d.ops.added
        out.chunks["deleted"] += d.ops.deleted
        if d.action is Action.FAILED:
            out.failures.append((d.key, d.message))
        if d.action is not Action.UNCHANGED:
            out.actions.append((d.key, str(d.action),
                                d.previous_key if d.action is Action.MOVED else None))


def unchanged_observation(item: SourceItem, old: StoredDocument) -> Observation:
    """Gate 1 passed; still refresh validators a 304 brought, or clear a missing count."""
    fresh = item.validators if item.validators is not None else old.validators
    if fresh != old.validators or old.missing:
        return Refreshed(item.key, item.stat, fresh)
    return Unchanged(item.key)


def observe(
    source: Source, item: SourceItem, old: StoredDocument | None, extractor: Extractor,
    derivation: str, chunker: Chunker, out: SourceReport,
    on_chunk: Callable[[Chunk], None] | None = None,
) -> Observation:
    """Gates 2 and 3 for one document that the stat gate let through.

    ``on_chunk`` sees every chunk made (for the run's chunking diagnostics).
    """
    try:
        data = source.read(item)
    except DocumentError as exc:
        return Failed(item.key, exc.reason)
    except Exception as exc:  # a bug or an unforeseen error must not stop the run
        return Failed(item.key, f"cannot be read: {type(exc).__name__}: {exc}")
    out.bytes_read += len(data)
    bytes_hash = source_bytes_hash(data)
    same_derivation = old is not None and old.derivation == derivation
    if same_derivation and old is not None and bytes_hash == old.bytes_hash:
        if old.stat == item.stat and old.validators == item.validators and not old.missing:
            return Unchanged(item.key)
        return Refreshed(item.key, item.stat, item.validators)
    try:
        record = extractor.extract(data, locator=item.locator, media_type=item.media_type)
    except DocumentError as exc:
        return Failed(item.key, exc.reason)
    except Exception as exc:  # a bug or an unforeseen error must not stop the run
        return Failed(item.key, f"cannot be extracted: {type(exc).__name__}: {exc}")
    out.warnings.extend(f"{item.key}: {warning}" for warning in record.warnings)
    del data  # the extracted text replaces the bytes: never both copies and the chunks
    text = record.text
    # Hashed block by block: a whole-text normalization holds word arrays many
    # times the size of the text.
    text_hash = normalized_pieces_hash(canonical_pieces([text]), NORMALIZER_VERSION,
                                       extractor.identity)
    rechunk = not (same_derivation and old is not None and text_hash == old.text_hash)
    return DocumentVersion(
        key=item.key, locator=item.locator, media_type=item.media_type, stat=item.stat,
        bytes_hash=bytes_hash, text_hash=text_hash, derivation=derivation, title=record.title,
        metadata=json.dumps(dict(record.metadata), sort_keys=True), text=text,
        chunks=_chunk_record(record, chunker, on_chunk) if rechunk else (), rechunked=rechunk,
        validators=item.validators,
    )


def _chunk_record(record: Record, chunker: Chunker,
                  on_chunk: Callable[[Chunk], None] | None) -> tuple[ChunkDraft, ...]:
    """Chunk the record's text as one stream; each chunk takes the heading it starts under.

    One stream (rather than one per section) keeps short sections together with
    their neighbours instead of making a fragment of every heading.
    """
    text, starts = _record_layout(record)
    drafts: list[ChunkDraft] = []
    # Chunks one at a time, not a tuple of them beside the drafts; one string per
    # boundary kind, not one per chunk (a big document has hundreds of thousands).
    for c in chunker.text_chunker().chunks([text]):
        if on_chunk is not None:
            on_chunk(c)
        section = max(0, bisect_right(starts, c.start) - 1)
        heading = record.sections[section].heading if record.sections else None
        drafts.append(ChunkDraft(c.identity, c.text, section, heading, c.start, c.end,
                                 c.token_count, sys.intern(str(c.boundary))))
    return tuple(drafts)


def _record_layout(record: Record) -> tuple[str, list[int]]:
    """The record's text and where each section starts in it (as :attr:`Record.text`)."""
    parts: list[str] = []
    starts: list[int] = []
    length = 0
    for section in record.sections:
        starts.append(length + (2 if parts else 0))
        for piece in (section.heading, section.text):
            if piece:
                length += len(piece) + (2 if parts else 0)
                parts.append(piece)
    return "\n\n".join(parts), starts


def embed_plan(
    the_plan: Plan, embedder: Embedder, out: SourceReport, progress: Progress | None,
    earlier: Collection[str] = frozenset(), cache: RecordStore | None = None,
    keep: bool = True,
) -> tuple[dict[str, npt.NDArray[np.float32]], set[str]]:
    """Vectors of the plan's cache misses; digests whose batch failed are returned apart.

    Counts add up in ``out``; ``earlier`` are the digests new to documents of
    earlier batches of the same source, counted there already. With a ``cache``,
    each batch of vectors enters the store's embedding cache as soon as it is
    computed, so an interruption loses none of them; then only with ``keep`` are
    they returned too (an external vector store needs them; the store finds
    them in its cache), and memory does not grow with a document's chunks.
    """
    chunks = {c.digest: c for d in the_plan.documents if d.version is not None
              for c in d.version.chunks}
    texts = {digest: c.text for digest, c in chunks.items()}
    wanted = list(the_plan.to_embed)
    limit = embedder.max_input_tokens
    if limit is not None and wanted:
        lengths = embedder.count_tokens([texts[d] for d in wanted])
        out.embeddings_truncated += sum(n > limit for n in lengths)
    else:
        lengths = [chunks[d].tokens for d in wanted]
    wanted = by_length(wanted, lengths)
    vectors, failed = _embed_texts(embedder, wanted, texts, out, progress, cache, keep)
    count_reused(the_plan, earlier, out)
    return vectors, failed


def by_length(items: Sequence[T], lengths: Sequence[int]) -> list[T]:
    """``items`` ordered by their ``lengths`` (in tokens), ties in their given order.

    A batch is padded to its longest text, so batches of texts of about one length
    waste least of the model's work: on real documentation the model was fed 1.39
    times the real word pieces in plan order and 1.06 times in this one
    (``benchmarks/embed.py``).
    """
    return [items[i] for i in sorted(range(len(items)), key=lengths.__getitem__)]


def count_reused(the_plan: Plan, earlier: Collection[str], out: SourceReport) -> None:
    """Count the plan's added chunks that need no embedding (the cache holds their vector).

    ``earlier`` are the digests new to earlier batches of the same source, counted there.
    """
    added = {d for doc in the_plan.documents for d in doc.ops.added_digests} - set(earlier)
    out.embeddings_reused += len(added - set(the_plan.to_embed))


def _embed_texts(
    embedder: Embedder, wanted: list[str], texts: Mapping[str, str], out: SourceReport,
    progress: Progress | None, cache: RecordStore | None = None, keep: bool = True,
) -> tuple[dict[str, npt.NDArray[np.float32]], set[str]]:
    """Vectors of ``wanted`` digests in batches; the digests that could not be embedded apart.

    ``out.embeddings_computed`` counts each batch as it is done (and, with a
    ``cache``, committed there), so an interrupted run reports what it kept.
    """
    vectors: dict[str, npt.NDArray[np.float32]] = {}
    failed: set[str] = set()
    for start in range(0, len(wanted), EMBED_BATCH):
        batch = wanted[start : start + EMBED_BATCH]
        done: dict[str, npt.NDArray[np.float32]] = {}
        try:
            done.update(_embed_batch(embedder, batch, texts))
        except Exception:  # a provider's failure must not half-apply anything
            # Retry one by one, so one bad chunk fails only its own document.
            for one in batch:
                try:
                    done.update(_embed_batch(embedder, [one], texts))
                except Exception as exc:
                    failed.add(one)
                    out.warnings.append(f"embedding failed for chunk {one[:12]}: {exc}")
        if cache is not None:
            cache.put_vectors(embedder.identity, done)
        if keep or cache is None:
            vectors.update(done)
        out.embeddings_computed += len(done)
        if progress is not None:
            progress("embed", min(start + EMBED_BATCH, len(wanted)), len(wanted))
    return vectors, failed


def _embed_batch(embedder: Embedder, batch: list[str], texts: Mapping[str, str],
                 ) -> dict[str, npt.NDArray[np.float32]]:
    result = embedder.embed([texts[d] for d in batch])
    if result.shape != (len(batch), embedder.dimension):
        raise ValueError(f"the embedder returned shape {result.shape} for {len(batch)} texts")
    if not np.isfinite(result).all():
        raise ValueError("the embedder returned non-finite values")
    return dict(zip(batch, result, strict=True))


def apply_plan(
    the_plan: Plan, vectors: Mapping[str, npt.NDArray[np.float32]], failed: set[str],
    store: RecordStore, embedder: Embedder, out: SourceReport, progress: Progress | None,
    sink: VectorSink | None = None, skip: frozenset[str] = frozenset(),
) -> None:
    """Write a plan's documents to the store (and ``sink``), moves first and deletions last.

    A document whose new vectors failed keeps its previous version and counts as failed.
    Without a sink the documents are committed together (:meth:`RecordStore.batch`);
    with one, each is committed on its own, as the outbox protocol between the
    records and the sink needs.
    """
    for doc in the_plan.documents:
        if doc.missing:
            store.mark_missing(the_plan.source, doc.key)
    order = {Action.MOVED: 0, Action.DELETED: 2}
    docs = sorted(the_plan.documents, key=lambda d: order.get(d.action, 1))
    writable = [d for d in docs if d.writes]
    now = utc_now()
    in_batch = 0  # applied inside the batch: counted once it commits
    with store.batch() if sink is None else contextlib.nullcontext():
        for n, doc in enumerate(writable, 1):
            if failed.intersection(doc.ops.added_digests):
                _kept_previous(doc, "embedding failed", out)
                continue
            mine = {d: vectors[d] for d in doc.ops.added_digests if d in vectors}
            if sink is None:
                store.apply(the_plan.source, doc, mine, embedder.identity, now)
                in_batch += 1
            else:
                try:
                    written = write_document(store, sink, the_plan.source, doc, mine,
                                             embedder.identity, now, skip)
                except VectorStoreError as exc:
                    _kept_previous(doc, str(exc), out)
                    continue
                out.applied += 1
                out.vectors_upserted += written.upserted
                out.vectors_deleted += written.deleted
                if written.warning:
                    out.warnings.append(written.warning)
            if progress is not None:
                progress("apply", n, len(writable))
    out.applied += in_batch


def _kept_previous(doc: DocumentPlan, why: str, out: SourceReport) -> None:
    """Count a document that could not be written as failed: its previous version stays."""
    out.documents[str(doc.action)] -= 1
    out.documents[str(Action.FAILED)] += 1
    out.failures.append((doc.key, f"{why}; the previous version is kept"))
