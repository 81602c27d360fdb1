"""Keeping an external vector store a mirror of the record store.

The records are the truth; the sink holds one point per indexed current chunk,
under an id derived from (source, key, chunk identity, occurrence). One
document is written in this order (:func:`write_document`):

1. upsert the document's new points into the sink;
2. commit the records, with the ids of the document's old points in the outbox;
3. delete the old points from the sink;
4. clear those outbox entries.

A crash after 1 leaves points no record describes (strays): the next sync
writes the same ids again, and reconciliation removes any that no record ever
claims. A crash after 2 leaves old points in the outbox, which every sync
replays first (:func:`replay_outbox`). So every crash converges.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kbsync.core.identity import vector_id
from kbsync.core.plan import Action, DocumentPlan
from kbsync.crashpoints import crashpoint
from kbsync.errors import VectorStoreError
from kbsync.store import ChunkRef, Manifest, Mirror
from kbsync.vectors import Payload, VectorPoint, VectorSink

__all__ = [
    "IndexWrite",
    "Mirrored",
    "Reconciliation",
    "erase",
    "expected_points",
    "prepare",
    "reconcile",
    "replay_outbox",
    "write_document",
]

_SHOWN_IDS = 10


class Mirrored(Manifest, Mirror, Protocol):
    """What writing a document to the records and the sink uses: the records' writes
    (:meth:`~kbsync.store.Manifest.apply`) and the mirror's view of them."""


@dataclass(frozen=True, slots=True)
class IndexWrite:
    """What writing one document did to a vector index (to the sink, when it mirrors one);
    ``warning`` when a deletion is postponed.

    ``committed`` is false for a write that commits with its transaction (a batch).
    """

    upserted: int = 0
    deleted: int = 0
    warning: str = ""
    committed: bool = True


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """The differences between the records and the sink, in both directions.

    ``stale`` points exist under the right id with another payload (a chunk that
    moved inside its document, a vector of a former embedder).
    """

    missing: frozenset[str]
    stray: frozenset[str]
    stale: frozenset[str]
    dimension: int | None
    expected_dimension: int
    pending: int
    unrepairable: int = 0

    @property
    def wrong_dimension(self) -> bool:
        return self.dimension is not None and self.dimension != self.expected_dimension

    def problems(self) -> list[str]:
        out = []
        if self.wrong_dimension:
            out.append(f"vector store: its vectors have {self.dimension} dimensions, "
                       f"the embedder gives {self.expected_dimension}")
        for name, ids in (("missing from", self.missing), ("stray in", self.stray),
                          ("out of date in", self.stale)):
            if ids:
                shown = sorted(ids)[:_SHOWN_IDS]
                more = f" and {len(ids) - len(shown)} more" if len(ids) > len(shown) else ""
                out.append(f"vector store: {len(ids)} vector(s) {name} it: "
                           f"{', '.join(shown)}{more}")
        if self.pending:
            out.append(f"vector store: {self.pending} deletion(s) pending in the outbox")
        if self.unrepairable:
            out.append(f"vector store: {self.unrepairable} vector(s) not in the embedding cache "
                       "could not be restored (sync to embed them)")
        return out


def payloads(refs: Iterable[ChunkRef], embedder: str) -> dict[str, Payload]:
    """Point id -> payload for chunks given in document order.

    The occurrence of a chunk identity counts within its document, so a repeated
    chunk gets one point per place and an edit elsewhere keeps the ids.
    """
    out: dict[str, Payload] = {}
    seen: Counter[tuple[str, str, str]] = Counter()
    for r in refs:
        n = seen[(r.source, r.key, r.digest)]
        seen[(r.source, r.key, r.digest)] += 1
        out[vector_id(r.source, r.key, r.digest, n)] = Payload(
            r.source, r.key, r.index, r.digest, r.heading, r.start, r.end, embedder)
    return out


def expected_points(store: Mirror, embedder: str) -> dict[str, Payload]:
    """Every point the sink should hold, by id."""
    return payloads(store.indexed_chunks(), embedder)


def _points(store: Mirror, embedder: str, wanted: Mapping[str, Payload],
            fresh: Mapping[str, npt.NDArray[np.float32]]) -> list[VectorPoint]:
    """Points with their vectors: just embedded ones, else the embedding cache's."""
    digests = {p.digest for p in wanted.values()}
    vectors = {d: fresh[d] for d in digests if d in fresh}
    vectors |= store.vectors(embedder, digests - vectors.keys())
    return [VectorPoint(i, vectors[p.digest], p) for i, p in wanted.items() if p.digest in vectors]


def prepare(sink: VectorSink, dimension: int) -> bool:
    """Make sure the collection takes vectors of ``dimension``; whether it was (re)created.

    The sink is derived data: a collection of another dimension (a new embedder)
    is rebuilt from the records, not mixed.
    """
    if sink.dimension == dimension:
        return False
    crashpoint("sink.reset")
    sink.reset(dimension)
    return True


def replay_outbox(store: Mirror, sink: VectorSink) -> int:
    """Delete the vectors whose deletion was committed but maybe not done; how many."""
    pending = store.pending_outbox()
    if pending:
        crashpoint("sink.delete")
        sink.delete(pending)
        store.clear_outbox(pending)
    return len(pending)


def write_document(store: Mirrored, sink: VectorSink, source: str, doc: DocumentPlan,
                   vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
                   skip: Collection[str], *, defer_deletes: bool = False) -> IndexWrite:
    """Apply one document's plan to the records and the sink, in the crash-safe order.

    ``skip`` are the source's boilerplate digests, which are not indexed. With
    ``defer_deletes`` (the records commit later, with a worker's batch) the old points
    stay in the outbox, for :func:`replay_outbox` once that commit is made.
    Raises :class:`VectorStoreError` when the sink refuses the new points; then
    nothing was committed and the document keeps its previous version.
    """
    if doc.action in (Action.METADATA, Action.UNCHANGED):  # same chunks: nothing to learn
        store.apply(source, doc, vectors, embedder, now)
        return IndexWrite()
    old_refs = list(store.indexed_chunks(source, doc.previous_key or doc.key))
    old = payloads(old_refs, embedder)
    if doc.action is Action.DELETED:
        new_refs: list[ChunkRef] = []
    elif doc.action is Action.MOVED and not doc.edited:  # only the key (and so the ids) change
        new_refs = [replace(r, key=doc.key) for r in old_refs]
    else:
        assert doc.version is not None
        new_refs = [ChunkRef(source, doc.key, i, c.digest, c.heading, c.start, c.end)
                    for i, c in enumerate(doc.version.chunks) if c.digest not in skip]
    new = payloads(new_refs, embedder)
    upserts = {i: p for i, p in new.items() if old.get(i) != p}
    deletes = [i for i in old if i not in new]
    if upserts:
        try:
            crashpoint("sink.upsert")
            sink.upsert(_points(store, embedder, upserts, vectors))
        except Exception as exc:  # any client error: nothing is committed
            raise VectorStoreError(f"the vector store refused the new vectors: {exc}") from exc
    store.apply(source, doc, vectors, embedder, now, outbox=deletes)
    if not deletes:
        return IndexWrite(upserted=len(upserts))
    if defer_deletes:
        return IndexWrite(upserted=len(upserts), deleted=len(deletes), committed=False)
    try:
        crashpoint("sink.delete")
        sink.delete(deletes)
    except Exception as exc:  # the outbox keeps them for the next sync
        return IndexWrite(len(upserts), 0, f"{len(deletes)} old vector(s) of {doc.key} stay in "
                                          f"the outbox until the next sync: {exc}")
    store.clear_outbox(deletes)
    return IndexWrite(upserted=len(upserts), deleted=len(deletes))


def reconcile(store: Mirror, sink: VectorSink, embedder: str, dimension: int, *,
              repair: bool = False) -> Reconciliation:
    """Compare the records with the sink; with ``repair``, make the sink match them.

    Repair replays the outbox, rebuilds a collection of the wrong dimension,
    deletes strays and writes missing and out-of-date points from the embedding
    cache. The result describes what was found before repairing.
    """
    expected = expected_points(store, embedder)
    pending = store.pending_outbox()
    have = {p.id: p.payload for p in sink.scan()}
    found = Reconciliation(
        missing=frozenset(expected.keys() - have.keys()),
        stray=frozenset(have.keys() - expected.keys()),
        stale=frozenset(i for i, p in expected.items() if i in have and have[i] != p),
        dimension=sink.dimension, expected_dimension=dimension, pending=len(pending),
    )
    if not repair:
        return found
    replay_outbox(store, sink)
    rewrite = found.missing | found.stale
    if prepare(sink, dimension):
        rewrite = frozenset(expected)
    else:
        crashpoint("sink.delete")
        sink.delete(sorted(found.stray))
    points = _points(store, embedder, {i: expected[i] for i in rewrite}, {})
    crashpoint("sink.upsert")
    sink.upsert(points)
    return replace(found, unrepairable=len(rewrite) - len(points))


def erase(store: Mirror, sink: VectorSink, embedder: str, pattern: str) -> None:
    """Delete the sink's points of documents whose key matches ``pattern``.

    Both the points the records describe and any stray point whose payload
    names such a document go. Called before the records are erased, so an
    interruption leaves at worst vectors missing for documents the user asked
    to remove (repeating the erase finishes it).
    """
    ids = {i for i, p in expected_points(store, embedder).items()
           if fnmatch.fnmatchcase(p.key, pattern)}
    ids.update(p.id for p in sink.scan()
               if p.payload is not None and fnmatch.fnmatchcase(p.payload.key, pattern))
    crashpoint("sink.delete")
    sink.delete(sorted(ids))
