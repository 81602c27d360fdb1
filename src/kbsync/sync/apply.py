"""Apply a plan: write its documents (moves first, deletions last) and count what it did."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kbsync.core.plan import Action, DocumentPlan, Plan, StoredDocument, mass_deletion, plan
from kbsync.embed import Embedder
from kbsync.errors import VectorStoreError
from kbsync.store import EmbeddingCache, Manifest
from kbsync.sync.collect import save_held
from kbsync.sync.mirror import IndexWrite
from kbsync.sync.tally import Progress, SourceTally, utc_now
from kbsync.sync.vector_index import VectorIndex

__all__ = ["Applying", "apply_plan", "count_plan", "delete_documents", "mass_deletion_message",
           "refuse_mass_deletion"]


class Applying(Manifest, EmbeddingCache, Protocol):
    """What applying a plan uses of a store: its manifest (missing counts, the digests of
    documents to delete) and its embedding cache (the vectors held for it)."""


def mass_deletion_message(gone: int, stored: int) -> str:
    """Why a source's deletions wait for consent (:func:`kbsync.core.plan.mass_deletion`)."""
    return (f"{gone:,} of this source's {stored:,} documents are gone, more than half: none "
            "was deleted, all are kept (use --allow-mass-delete)")


def refuse_mass_deletion(out: SourceTally, stored: int, gone: int, allowed: bool) -> bool:
    """Whether deleting ``gone`` of a source's ``stored`` documents waits for consent; if it
    does, ``out`` says so and nothing of them is to be deleted."""
    if not gone or allowed or not mass_deletion(stored, gone):
        return False
    out.deletions_blocked = True
    out.deletions_held += gone
    out.failures.append(("", mass_deletion_message(gone, stored)))
    return True


def delete_documents(store: Applying, index: VectorIndex, source: str,
                     gone: Collection[StoredDocument], embedder: Embedder, out: SourceTally,
                     progress: Progress | None = None, *, dry_run: bool = False) -> None:
    """Delete the ``gone`` documents of ``source`` (vanished, moved nowhere) and count them;
    ``progress`` is told of them as the ``delete`` stage (not ``apply``: the applied
    batches' count stays as they left it)."""
    docs = {d.key: d for d in store.with_digests(source, gone)}
    the_plan = plan(source, docs, [], [], allow_mass_delete=True)
    count_plan(out, the_plan.documents)
    if not dry_run:
        apply_plan(the_plan, {}, set(), store, index, embedder, out,
                   None if progress is None else _as_stage("delete", progress))


def _as_stage(stage: str, progress: Progress) -> Progress:
    """``progress``, told of every stage as ``stage``."""
    return lambda _, done, total: progress(stage, done, total)


def count_plan(out: SourceTally, docs: Collection[DocumentPlan]) -> None:
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


def apply_plan(
    the_plan: Plan, vectors: Mapping[str, npt.NDArray[np.float32]], failed: set[str],
    store: Applying, index: VectorIndex, embedder: Embedder, out: SourceTally,
    progress: Progress | None, skip: frozenset[str] = frozenset(), *,
    held: Mapping[str, npt.NDArray[np.float32]] | None = None,
) -> None:
    """Write a plan's documents to the store and its vector ``index``, moves first and
    deletions last.

    A document whose new vectors failed, or were refused, keeps its previous version
    and counts as failed. The documents are written in the index's transaction: one
    for the lot on the store's own index, one per document when an external vector
    store is mirrored (see :mod:`kbsync.sync.vector_index`). ``held`` vectors (not yet in
    the embedding cache, see :func:`~kbsync.sync.embedding.embed_plan`) go into the
    cache in that transaction, or in one of their own should it fail.
    """
    try:
        _apply(the_plan, vectors, failed, store, index, embedder, out, progress, skip,
               held or {})
    except BaseException:
        if held:
            save_held(store, embedder.identity, held)
        raise


def _apply(
    the_plan: Plan, vectors: Mapping[str, npt.NDArray[np.float32]], failed: set[str],
    store: Applying, index: VectorIndex, embedder: Embedder, out: SourceTally,
    progress: Progress | None, skip: frozenset[str],
    held: Mapping[str, npt.NDArray[np.float32]],
) -> None:
    for doc in the_plan.documents:
        if doc.missing:
            store.mark_missing(the_plan.source, doc.key)
    order = {Action.MOVED: 0, Action.DELETED: 2}
    docs = sorted(the_plan.documents, key=lambda d: order.get(d.action, 1))
    writable = [d for d in docs if d.writes]
    now = utc_now()
    pending: list[IndexWrite] = []  # written, counted once committed
    with index.transaction():
        if held:
            store.put_vectors(embedder.identity, held)
        for n, doc in enumerate(writable, 1):
            if failed.intersection(doc.ops.added_digests):
                _kept_previous(doc, "embedding failed", out)
                continue
            mine = {d: vectors[d] for d in doc.ops.added_digests if d in vectors}
            try:
                pending.append(index.write(the_plan.source, doc, mine, embedder.identity, now,
                                           skip))
            except VectorStoreError as exc:
                _kept_previous(doc, str(exc), out)
                continue
            if pending[-1].committed:
                _count_written(pending, out)
            if progress is not None:
                progress("apply", n, len(writable))
    _count_written(pending, out)


def _count_written(writes: list[IndexWrite], out: SourceTally) -> None:
    """Count committed writes in ``out`` (and forget them)."""
    for wrote in writes:
        out.documents_applied += 1
        out.vectors_upserted += wrote.upserted
        out.vectors_deleted += wrote.deleted
        if wrote.warning:
            out.warnings.append(wrote.warning)
    writes.clear()


def _kept_previous(doc: DocumentPlan, why: str, out: SourceTally) -> None:
    """Count a document that could not be written as failed: its previous version stays."""
    out.documents[str(doc.action)] -= 1
    out.documents[str(Action.FAILED)] += 1
    out.failures.append((doc.key, f"{why}; the previous version is kept"))
