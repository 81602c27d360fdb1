"""The single-process driver's batches: planned, then embedded in a thread of their own
while the batch before is applied.

The single-process driver (:mod:`kbsync.sync.single`) reads a source's changed
documents into its scratch file, then hands them to the steps
(:mod:`kbsync.sync.steps`) a batch at a time. Each batch is planned, embedded and
applied in one transaction. The embedding of a batch runs in a thread of its own
(:class:`~kbsync.sync.embedding.Embedding`) while the batch before it is applied and
the one after it planned (:class:`Pipeline`), so that the model and the store's
writes share the machine instead of taking turns.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kbsync.core.plan import Plan
from kbsync.sync.context import Context
from kbsync.sync.embedding import Embedding, Vectors
from kbsync.sync.steps import apply_batch, embed_batch
from kbsync.sync.tally import Progress, SourceTally

__all__ = ["Added", "Pipeline"]


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

    def __init__(self, ctx: Context, skip: frozenset[str], out: SourceTally) -> None:
        self._ctx, self._skip, self._out = ctx, skip, out
        self._ahead: _Embedding | None = None
        self._failed: set[str] = set()  # digests the last batch collected failed to embed

    def in_flight(self) -> Collection[str]:
        """The digests being embedded now (for :func:`plan_batch`'s ``assumed``)."""
        return self._ahead.embeds if self._ahead is not None else frozenset()

    def push(self, the_plan: Plan, borrowed: frozenset[str], progress: Progress | None) -> None:
        """Start embedding ``the_plan``, then apply the batch before it."""
        previous = self._collect()
        self._ahead = _Embedding(the_plan, borrowed, Embedding(the_plan, self._ctx.embedder),
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
            job.stop(self._out, self._ctx.store)

    def _collect(self) -> tuple[Plan, Vectors, set[str], Progress | None] | None:
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        vectors, failed = embed_batch(self._ctx, ahead.plan, self._out, ahead.progress,
                                      ahead.job)
        inherited = self._failed & ahead.borrowed
        self._failed = failed
        return ahead.plan, vectors, failed | inherited, ahead.progress

    def _apply(self, the_plan: Plan, vectors: Vectors, failed: set[str],
               progress: Progress | None) -> None:
        apply_batch(self._ctx, the_plan, vectors, failed, self._skip, self._out, progress)
