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
(from the digests the store holds, then a backfill of chunks that stopped
being boilerplate). Workers skip the boilerplate the store knew when the run
began, so on a first sync boilerplate chunks are embedded once; later syncs
skip them as a single process does.

This is the parallel driver of :mod:`kbsync.sync`; it runs the steps the single one does.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.model import (
    ItemError,
    SourceItem,
    SourceStat,
    Validators,
)
from kbsync.plan import (
    DocumentVersion,
    Failed,
    Observation,
    StoredDocument,
    plan,
)
from kbsync.report import SyncResult
from kbsync.sources import Source
from kbsync.store import RecordStore
from kbsync.sync.apply import apply_plan, count_plan, delete_documents, refuse_mass_deletion
from kbsync.sync.chunker import Chunker
from kbsync.sync.embedding import (
    backfill,
    cached_vectors,
    embed_plan,
    embedded_meta_name,
    refuse_dimension_change,
)
from kbsync.sync.listing import Revisited, keep_schedules, list_source
from kbsync.sync.observe import (
    Derive,
    ExtractorFor,
    count_unchanged,
    derivation,
    deriver,
    observe,
    stat_gate_passes,
    unchanged_observation,
)
from kbsync.sync.options import BatchLimits, SyncOptions
from kbsync.sync.removed import RemovedSource, forget_released, keep_removed, removed_sources
from kbsync.sync.replacements import compare_stored, reports_change, screen
from kbsync.sync.scratch import Scratch
from kbsync.sync.tally import Progress, SourceTally, SyncReport, utc_now
from kbsync.vector_index import EmbeddedIndex

__all__ = ["ClaimedDocument", "WorkQueue", "drain", "sync_parallel"]


class ClaimedDocument(Protocol):
    """A document of a run that this worker holds until its transaction ends."""

    @property
    def run(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def item(self) -> Mapping[str, Any]: ...


@runtime_checkable
class WorkQueue(RecordStore, Protocol):
    """A record store that also holds the work queue of parallel runs (PostgreSQL)."""

    def enqueue(self, run: str, source: str, items: Sequence[tuple[str, Mapping[str, Any]]],
                state: str = "todo") -> int: ...

    def claim(self, run: str) -> AbstractContextManager[ClaimedDocument | None]: ...

    def finish(self, claim: Any, result: Mapping[str, Any]) -> None: ...

    def claim_vanished(self, run: str, source: str, text_hash: str,
                       derivation: str) -> StoredDocument | None: ...

    def claim_vanished_at(self, run: str, source: str, key: str) -> StoredDocument | None: ...

    def stored(self, source: str, key: str) -> StoredDocument | None: ...

    def vanished(self, run: str, source: str) -> list[str]: ...

    def results(self, run: str, source: str) -> Iterator[tuple[str, dict[str, Any]]]: ...

    def abandon_runs(self) -> int: ...

    def open_runs(self) -> list[str]: ...

    def pending(self, run: str) -> int: ...

    def end_run(self, run: str) -> None: ...

    def prepare_vectors(self, dimension: int) -> None: ...

    def finish_vectors(self, dimension: int) -> None: ...


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
    allow_mass_delete = options.allow_mass_delete
    refuse_dimension_change(store, embedder)
    # This process holds the writer lock: what is queued is left from a killed sync, and a
    # worker serving it would apply listings that are out of date (or take a vanished
    # document of that run for the origin of a move).
    store.abandon_runs()
    store.prepare_vectors(embedder.dimension)
    report = SyncReport(dry_run=False, started=utc_now(), embedder=embedder.identity)
    run = f"{report.started}/{uuid.uuid4().hex[:12]}"
    removed, released = removed_sources(store, sources, allow_mass_delete)
    kept = []
    for held in (s for s in removed if s.name not in released):
        kept.append(SourceTally(source=held.name))
        keep_removed(held, kept[-1])
    everything: list[Source] = [*sources, *(s for s in removed if s.name in released)]
    listed: dict[str, _Listed] = {}
    started = time.perf_counter()
    for source in everything:
        out = SourceTally(source=source.name)
        report.sources.append(out)
        if isinstance(source, RemovedSource):
            out.warnings.append("no longer configured: its documents are deleted")
        listed[source.name] = _enqueue(run, source, store, embedder, extractor_for, chunker,
                                      options.verify, out, options.scratch_dir,
                                      options.accept_replacements)
    report.seconds["list"] = time.perf_counter() - started
    started = time.perf_counter()
    _work(run, everything, store, embedder, extractor_for, chunker, workers, spawn, progress,
          report)
    report.seconds["documents"] = time.perf_counter() - started
    started = time.perf_counter()
    store.finish_vectors(embedder.dimension)
    report.seconds["index"] = time.perf_counter() - started
    started = time.perf_counter()
    for source, out in zip(everything, report.sources, strict=True):
        _finish_source(run, source, listed[source.name], store, embedder, options, out)
    store.end_run(run)
    report.seconds["finish"] = time.perf_counter() - started
    report.finished = utc_now()
    store.set_meta("chunker", chunker.fingerprint)
    store.set_meta("embedder", embedder.identity)
    forget_released(store, released | {s.name for s in sources})
    report.sources.extend(kept)
    result = report.result()
    store.record_run(result.started, result.finished, result.to_dict())
    return result


def _work(run: str, sources: Sequence[Source], store: WorkQueue, embedder: Embedder,
          extractor_for: ExtractorFor, chunker: Chunker, workers: int, spawn: Spawn | None,
          progress: Progress | None, report: SyncReport) -> None:
    """Drain the run's queue here while ``workers - 1`` spawned processes drain it too."""
    total = store.pending(run)
    # Nothing queued (a no-op sync): no process to start.
    wait = spawn(run, min(workers - 1, total)) if spawn is not None and workers > 1 and total \
        else None
    codes: list[int] = []
    try:
        drain(run, sources, store, embedder, extractor_for, chunker,
              progress=_overall(store, run, total, progress))
    finally:
        if wait is not None:
            codes = wait()
    if any(codes) and report.sources:
        report.sources[0].warnings.append(
            f"{sum(c != 0 for c in codes)} of {len(codes)} worker processes failed; "
            "this process finished their documents")
    # Whatever a dead worker left behind went back to the queue: finish it here.
    drain(run, sources, store, embedder, extractor_for, chunker)


def _finish_source(run: str, source: Source, listed: _Listed, store: WorkQueue,
                   embedder: Embedder, options: SyncOptions, out: SourceTally) -> None:
    """What needs every document of a source, once the queue is empty: the workers'
    tallies, deletions, revisit schedules, boilerplate and its backfill."""
    _collect(run, source.name, store, out)
    _delete_vanished(run, source.name, store, embedder, out, listed.stored,
                     options.allow_mass_delete or isinstance(source, RemovedSource))
    keep_schedules(store, source.name, listed.revisited, out)
    if options.index_boilerplate:
        shared: frozenset[str] = frozenset()
    elif listed.changed:
        shared = _boilerplate(store, source.name, options.boilerplate_share,
                              options.scratch_dir)
    else:  # nothing read or gone: the digests, and so the boilerplate, are as they were
        shared = store.boilerplate(source.name)
    out.boilerplate_chunks = len(shared)
    store.set_boilerplate(source.name, shared)
    # Recorded as a single-process sync records it, and withdrawn when a vector is still
    # missing: a later sync in one process trusts it to skip the search for such chunks.
    store.set_meta(embedded_meta_name(source.name),
                   embedder.identity if backfill(source.name, store, embedder, out) else "")


def _overall(store: WorkQueue, run: str, total: int,
             progress: Progress | None) -> Progress | None:
    """Progress of the whole run (every worker's documents), not only this process's."""
    if progress is None:
        return None

    def tick(stage: str, done: int, _: int) -> None:
        if done % 20 == 1:  # counting the queue is a query: not after every document
            progress(stage, total - store.pending(run), total)

    return tick


def _enqueue(run: str, source: Source, store: WorkQueue, embedder: Embedder,
             extractor_for: ExtractorFor, chunker: Chunker, verify: bool,
             out: SourceTally, scratch_dir: Path | None,
             accept_replacements: bool = False) -> _Listed:
    """List one source, settle what the stat gate passes and queue the rest.

    The listing and the manifest wait in a scratch file, as in a single-process
    sync, so this process holds no whole listing.
    """
    derive = deriver(extractor_for, chunker)
    with Scratch(scratch_dir) as scratch:
        listing = list_source(source, store, derive, verify, scratch, out)
        complete = listing.complete
        # Vanished documents first: a worker already serving the run may take one as the
        # origin of a move as soon as the documents that need reading arrive.
        moves = complete and scratch.vanish() > 0
        if moves:
            for page in scratch.gone(_PAGE):
                store.enqueue(run, source.name, [(d.key, {}) for d in page], state="vanished")
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
                queued.append((entry.key, _item_json(entry, made_with, embedder.identity,
                                                     moves, accept_replacements)))
                reads += 1
            if len(queued) == _PAGE:  # queued as listed, not held for the whole source
                store.enqueue(run, source.name, queued)
                queued.clear()
            if len(settled) == _PAGE:
                _settle(source.name, settled, store, embedder, out)
                settled.clear()
        store.enqueue(run, source.name, queued)
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


def _boilerplate(store: WorkQueue, source: str, share: float, scratch_dir: Path | None,
                 ) -> frozenset[str]:
    """The boilerplate of what the store holds of ``source``, counted in a scratch file."""
    with Scratch(scratch_dir) as scratch:
        scratch.count_stored(store.chunk_digests(source))
        return scratch.boilerplate(share)


def drain(run: str, sources: Sequence[Source], store: WorkQueue, embedder: Embedder,
          extractor_for: ExtractorFor, chunker: Chunker, *,
          progress: Progress | None = None) -> int:
    """Claim and process documents of ``run`` until none is left unclaimed; how many."""
    by_name = {s.name: s for s in sources}
    skips: dict[str, frozenset[str]] = {}
    done = 0
    while True:
        with store.claim(run) as job:
            if job is None:
                return done
            source = by_name.get(job.source)
            if source is None:
                raise ConfigError(f"this worker has no source named {job.source!r}: workers "
                                  "must use the same kbsync.toml as the sync they serve")
            if job.source not in skips:
                skips[job.source] = store.boilerplate(job.source)
            result = _process(job, source, store, embedder, extractor_for, chunker,
                              skips[job.source])
            store.finish(job, result)
        done += 1
        if progress is not None:
            progress("documents", done, 0)


def _process(job: ClaimedDocument, source: Source, store: WorkQueue, embedder: Embedder,
             extractor_for: ExtractorFor, chunker: Chunker,
             skip: frozenset[str]) -> dict[str, Any]:
    """One document, start to finish, inside its claim's transaction; its report as data."""
    item = _item(job.key, job.item)
    extractor = extractor_for(item.media_type)
    made_with = job.item["derivation"]
    if extractor is None or derivation(chunker, extractor.identity) != made_with \
            or job.item["embedder"] != embedder.identity:
        raise ConfigError("this worker's chunker, extractors or embedder differ from those of "
                          "the sync it serves: use the same kbsync.toml and kbsync version")
    out = SourceTally(source=job.source)
    old = store.stored(job.source, job.key)
    observation = observe(source, item, old, extractor, made_with, chunker, out)
    observation, change = screen(store, job.source, observation, old, skip, out,
                                 accept=job.item.get("accept_replacements", False), write=True)
    stored = {job.key: old} if old is not None else {}
    origin: StoredDocument | None = None
    # Without vanished documents in the run (a first sync, say) there is no move to look for.
    if isinstance(observation, DocumentVersion) and old is None and job.item.get("moves", True):
        origin = store.claim_vanished(job.run, job.source, observation.text_hash,
                                      observation.derivation)
        if origin is None and observation.renamed_from is not None:  # edited, says the source
            origin = store.claim_vanished_at(job.run, job.source, observation.renamed_from)
        if origin is not None:  # a rename: the origin's chunks and vectors are kept
            stored[origin.key] = origin
    chunks = observation.chunks if isinstance(observation, DocumentVersion) else ()
    the_plan = plan(job.source, stored, [job.key], [observation],
                    cached_vectors(store, embedder.identity, chunks, skip), skip=skip)
    if origin is not None and any(d.edited for d in the_plan.documents):
        change = compare_stored(store, job.source, observation, origin, skip)
    count_plan(out, the_plan.documents)
    tokens = {c.digest: c.tokens for c in observation.chunks} \
        if isinstance(observation, DocumentVersion) else {}
    out.embedding_tokens = sum(tokens[d] for d in the_plan.to_embed)
    held, failed = embed_plan(the_plan, embedder, out, None, cache=store, keep=False, hold=True)
    apply_plan(the_plan, {}, failed, store, EmbeddedIndex(store), embedder, out, None, held=held)
    if change is not None and any(reports_change(d) for d in the_plan.documents):
        out.note_change(job.key, change)
    return out.to_dict()


def _collect(run: str, source: str, store: WorkQueue, out: SourceTally) -> None:
    """Add the workers' tallies of one source to its own."""
    for _, result in store.results(run, source):
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



def _item_json(item: SourceItem, derivation: str, embedder: str,
               moves: bool = True, accept_replacements: bool = False) -> dict[str, Any]:
    """A queued document; ``moves``: whether documents of its source vanished in this run."""
    stat = item.stat
    validators = item.validators
    return {
        "locator": item.locator, "media_type": item.media_type,
        "stat": None if stat is None else [stat.size, stat.mtime_ns, stat.inode],
        "validators": None if validators is None
        else [validators.etag, validators.last_modified],
        "not_modified": item.not_modified, "derivation": derivation, "embedder": embedder,
        "moves": moves, "accept_replacements": accept_replacements,
        "metadata": [list(pair) for pair in item.metadata],
        "renamed_from": item.renamed_from,
    }


def _item(key: str, data: Mapping[str, Any]) -> SourceItem:
    stat, validators = data["stat"], data["validators"]
    return SourceItem(key=key, locator=data["locator"], media_type=data["media_type"],
                      stat=None if stat is None else SourceStat(*stat),
                      validators=None if validators is None else Validators(*validators),
                      not_modified=data["not_modified"],
                      metadata=tuple((str(k), str(v)) for k, v in data.get("metadata", ())),
                      renamed_from=data.get("renamed_from"))
