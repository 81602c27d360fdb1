"""A source's changed documents planned, embedded and applied a batch at a time.

The single-process driver (:mod:`kbsync.sync.single`) reads a source's changed
documents into its scratch file, then hands them here a batch at a time. Each batch
is planned (screened, its moves matched, its cache misses found), embedded and
applied in one transaction. The embedding of a batch runs in a thread of its own
(:class:`~kbsync.sync.embedding.Embedding`) while the batch before it is applied and
the one after it planned (:class:`Pipeline`), so that the model and the store's
writes share the machine instead of taking turns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kbsync.core.chunking import ChunkShape, shape_of
from kbsync.core.plan import (
    Action,
    DocumentVersion,
    Failed,
    Observation,
    Plan,
    StoredDocument,
    plan,
    text_key,
)
from kbsync.embed import Embedder
from kbsync.model import ChangeReport, Chunk
from kbsync.store import Meta
from kbsync.sync.apply import Applying, apply_plan, count_plan
from kbsync.sync.chunker import Chunker
from kbsync.sync.embedding import Embedding, Vectors, cached_vectors
from kbsync.sync.observe import ExtractorFor
from kbsync.sync.options import SyncOptions
from kbsync.sync.replacements import compare_stored, reports_change, screen
from kbsync.sync.scratch import Scratch
from kbsync.sync.tally import REPORT_LIMIT, Clock, Progress, SourceTally
from kbsync.sync.vector_index import VectorIndex

__all__ = ["Added", "Batch", "Batching", "Counted", "Pipeline", "Run", "plan_batch"]

Batch = Sequence[tuple[Observation, StoredDocument | None]]


class Batching(Applying, Meta, Protocol):
    """What a batch's steps use of a store: its manifest (stored digests and texts), its
    embedding cache, and meta (the replacements held)."""


@dataclass(frozen=True)
class Run:
    """What every step of one sync shares."""

    store: Batching
    embedder: Embedder
    extractor_for: ExtractorFor
    chunker: Chunker
    options: SyncOptions
    progress: Progress | None
    index: VectorIndex
    clock: Clock
    tally: Counter[ChunkShape]

    def count_chunk(self, chunk: Chunk) -> None:
        """Count ``chunk`` for the run's chunking diagnostics (its text is not kept)."""
        self.tally[shape_of(chunk)] += 1


class Added:
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


class Counted:
    """Progress of a source's batches in documents, against a total known before the first
    batch: the documents the batches hold (those read as changed, or vanished).

    Each stage counts a batch's documents as its work on them goes: embedding by the share
    of the batch's chunks done, applying by the share of its documents written. Batches
    overlap (one embeds while the one before it is applied), but each stage goes through
    them in order, so a batch's ticks of a stage start where the batches before it ended.
    No total grows and no count goes back: counted in each batch's own units, a bar read
    757/757, then 821/1,025.
    """

    def __init__(self, progress: Progress | None, documents: int) -> None:
        self._progress = progress
        self._documents = documents
        self._before = 0  # documents of the batches handed out so far

    def batch(self, documents: int) -> Progress | None:
        """The progress callback of the next batch, of ``documents`` documents."""
        progress = self._progress
        if progress is None:
            return None
        base, total = self._before, max(self._documents, self._before + documents)
        self._before += documents

        def tick(stage: str, done: int, of: int) -> None:
            share = documents if of <= 0 else documents * min(done, of) // of
            progress(stage, base + share, total)

        return tick


def plan_batch(run: Run, source: str, batch: Batch, scratch: Scratch, skip: frozenset[str],
               shared: frozenset[str], out: SourceTally, assumed: Collection[str],
               ) -> tuple[Plan, frozenset[str]]:
    """Plan one batch and count it in ``out``; the plan, and the digests it takes as
    embedded only because they are in ``assumed`` (those of earlier batches that are
    not in the cache yet: being embedded, or in a dry run never).

    The gone documents of ``scratch`` this batch moves from are offered no more.
    """
    store = run.store
    olds = {old.key: old for _, old in batch if old is not None}
    for seen, _ in batch:
        if isinstance(seen, Failed) and seen.stat is not None \
                and len(out.unreadable) < REPORT_LIMIT:
            out.unreadable[seen.key] = (seen.stat, seen.derivation, seen.message)
    observations, changes = _screen(run, source, [o for o, _ in batch], olds, shared, out)
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
    chunks = [c for v in versions for c in v.chunks]
    cached = cached_vectors(store, run.embedder.identity, chunks, skip,
                            write=not run.options.dry_run)
    borrowed = frozenset(c.digest for c in chunks if c.digest in assumed) - cached
    the_plan = plan(source, local, [o.key for o in observations], observations,
                    cached | borrowed, skip=skip, delete=False)
    scratch.moved(local[d.previous_key] for d in the_plan.documents
                  if d.action is Action.MOVED and d.previous_key is not None)
    tokens = {c.digest: c.tokens for c in chunks}
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
    run.clock.lap("plan")
    return the_plan, borrowed


def _screen(
    run: Run, source: str, observations: list[Observation], olds: Mapping[str, StoredDocument],
    shared: frozenset[str], out: SourceTally,
) -> tuple[list[Observation], dict[str, ChangeReport]]:
    """Every observation screened (:func:`~kbsync.sync.replacements.screen`): those to plan
    (a held document becomes :class:`~kbsync.core.plan.Held`) and the change report of each one
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


@dataclass(frozen=True)
class _Embedding:
    """A planned batch whose vectors are being computed."""

    plan: Plan
    borrowed: frozenset[str]
    job: Embedding
    progress: Progress | None
    embeds: frozenset[str]


class Pipeline:
    """Planned batches embedded and applied in order, a batch's embedding running while
    the batch before it is applied and the next one planned.

    A batch planned while the one before it is still embedding takes that one's
    digests as embedded (:meth:`in_flight`): they are committed with it, before this
    batch is applied. Should one of them fail, so do this batch's documents that
    hold it, keeping their previous version, as if they had failed to embed it.
    """

    def __init__(self, run: Run, source: str, skip: frozenset[str], out: SourceTally) -> None:
        self._run, self._source, self._skip, self._out = run, source, skip, out
        self._ahead: _Embedding | None = None
        self._failed: set[str] = set()  # digests the last batch collected failed to embed

    def in_flight(self) -> Collection[str]:
        """The digests being embedded now (for :func:`plan_batch`'s ``assumed``)."""
        return self._ahead.embeds if self._ahead is not None else frozenset()

    def push(self, the_plan: Plan, borrowed: frozenset[str], progress: Progress | None) -> None:
        """Start embedding ``the_plan``, then apply the batch before it."""
        previous = self._collect()
        self._ahead = _Embedding(the_plan, borrowed, Embedding(the_plan, self._run.embedder),
                                 progress, frozenset(the_plan.to_embed))
        if previous is not None:
            self._apply(*previous)

    def finish(self) -> None:
        """Apply the last batch."""
        previous = self._collect()
        if previous is not None:
            self._apply(*previous)

    def stop(self) -> None:
        """Stop the embedding in progress, if any, committing what it computed (the sync
        stops: an error, Ctrl-C)."""
        if self._ahead is not None:
            job, self._ahead = self._ahead.job, None
            job.stop(self._out, self._run.store)

    def _collect(self) -> tuple[Plan, Vectors, set[str], Progress | None] | None:
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        run = self._run
        keep = run.index.keeps_fresh_vectors  # else the last vectors wait for the batch
        vectors, failed = ahead.job.collect(
            self._out, ahead.progress, run.store, keep=keep, hold=not keep,
            cache_seconds=run.options.batch.cache_seconds)
        inherited = self._failed & ahead.borrowed
        self._failed = failed
        run.clock.lap("embed")
        return ahead.plan, vectors, failed | inherited, ahead.progress

    def _apply(self, the_plan: Plan, vectors: Vectors, failed: set[str],
               progress: Progress | None) -> None:
        run = self._run
        # The store's own index writes the batch's last vectors in its transaction.
        keep = run.index.keeps_fresh_vectors
        apply_plan(the_plan, vectors if keep else {}, failed, run.store, run.index,
                   run.embedder, self._out, progress, self._skip,
                   held=None if keep else vectors)
        run.clock.lap("apply")
