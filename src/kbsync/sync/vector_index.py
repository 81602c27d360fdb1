"""Where a sync writes the current chunks' vectors and a search finds them: one seam.

Two kinds of index sit behind :class:`VectorIndex`, so that applying a plan and
a vector search each have one path:

* :class:`EmbeddedIndex`: the vectors live in the record store itself (the
  embedding cache is the index). A document's records and vectors are one write,
  so a batch of documents commits as one transaction.
* :class:`MirroredIndex`: an external vector store (:class:`~kbsync.vectors.VectorSink`,
  such as Qdrant or LanceDB) mirrors the records in the crash-safe order of
  :mod:`kbsync.sync.mirror`, which commits each document on its own; searches rank
  in the sink, and the records turn its points into hits.

:func:`index_for` picks one from the configuration's sink (or its absence).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kbsync.core.plan import DocumentPlan
from kbsync.model import VectorNorm
from kbsync.store import Manifest, Nearest, SearchIndex
from kbsync.store.filters import Filters
from kbsync.sync.mirror import (
    IndexWrite,
    Mirrored,
    Reconciliation,
    payloads,
    prepare,
    reconcile,
    replay_outbox,
    write_document,
)
from kbsync.sync.mirror import erase as erase_points
from kbsync.vectors import VectorSink

__all__ = ["Embedded", "EmbeddedIndex", "Indexed", "MirroredIndex", "VectorIndex", "index_for"]

# Spare sink hits cover points that are out of step with the records.
_SPARE_HITS = 10


class Embedded(Manifest, SearchIndex, Protocol):
    """A store that is its own vector index: it applies plans with their vectors and
    searches them."""


class Indexed(Mirrored, SearchIndex, Protocol):
    """A store whose vectors an external vector store may mirror (:mod:`kbsync.sync.mirror`):
    it applies plans, keeps the outbox and the mirror's view, and turns points into hits."""


class VectorIndex(Protocol):
    """The current chunks' vectors: written by a sync, read by a vector search."""

    @property
    def mirrored(self) -> bool:
        """Whether the vectors live outside the records, so that they can drift from them
        and :meth:`reconcile` has something to compare."""
        ...

    @property
    def keeps_fresh_vectors(self) -> bool:
        """Whether :meth:`write` needs the vectors just computed handed to it (an external
        store is sent them); otherwise the embedding cache holds them already."""
        ...

    def begin(self, dimension: int) -> bool:
        """Make the index ready for a sync writing vectors of ``dimension`` (on a first
        load, the store defers what is cheaper to build after it); whether every vector
        must be written again at its end (a rebuilt collection)."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """The scope a batch of documents is written in: one transaction where the
        index allows it."""
        ...

    def write(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              skip: Collection[str]) -> IndexWrite:
        """Write one document's plan with its records; ``skip`` are the source's
        boilerplate digests, which are not indexed.

        The result says whether the write is committed already or only with the
        :meth:`transaction` it was made in (an index does one or the other).
        Raises :class:`~kbsync.errors.VectorStoreError` when the vectors are refused;
        then nothing was committed and the document keeps its previous version.
        """
        ...

    def deferring(self) -> AbstractContextManager[None]:
        """A scope whose writes are committed by an enclosing transaction of the store (a
        worker's claimed batch): what :meth:`write` would remove from the index at once
        waits in the outbox until the scope ends, after that commit."""
        ...

    def end(self, rewrite: bool, embedder: str, dimension: int) -> None:
        """Finish a sync (and build what :meth:`begin` deferred); ``rewrite`` when vectors of
        documents its plans left alone changed (boilerplate coming or going, a rebuilt
        collection)."""
        ...

    def nearest(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                filters: Filters | None = None, norm: VectorNorm | None = None) -> Nearest:
        """The ``k`` current chunks nearest ``vector``, of documents meeting ``filters``;
        vectors that cannot be right for ``norm`` (damaged) are left out and counted."""
        ...

    def reconcile(self, embedder: str, dimension: int, *,
                  repair: bool = False) -> Reconciliation | None:
        """The differences between the records and the vectors (``None`` when the
        vectors are the records); with ``repair``, remove them."""
        ...

    def erase(self, embedder: str, pattern: str) -> None:
        """Remove the vectors of documents whose key matches ``pattern``, before
        their records are erased."""
        ...

    def close(self) -> None:
        """Release what the index holds of its own (not the record store)."""
        ...


class EmbeddedIndex:
    """The record store's own vectors: nothing to mirror, nothing to reconcile."""

    mirrored = False
    keeps_fresh_vectors = False

    def __init__(self, store: Embedded) -> None:
        self.store = store

    def begin(self, dimension: int) -> bool:
        self.store.prepare_vectors(dimension)
        return False

    def transaction(self) -> AbstractContextManager[None]:
        return self.store.batch()

    def write(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              skip: Collection[str]) -> IndexWrite:
        self.store.apply(source, doc, vectors, embedder, now)
        return IndexWrite(committed=False)

    def deferring(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()  # nothing outside the store to remove

    def end(self, rewrite: bool, embedder: str, dimension: int) -> None:
        self.store.finish_vectors(dimension)

    def nearest(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                filters: Filters | None = None, norm: VectorNorm | None = None) -> Nearest:
        return self.store.search_vector(embedder, vector, k, filters, norm)

    def reconcile(self, embedder: str, dimension: int, *,
                  repair: bool = False) -> Reconciliation | None:
        return None

    def erase(self, embedder: str, pattern: str) -> None:
        pass  # the store erases the vectors with the records

    def close(self) -> None:
        pass  # the store is its owner's to close


class MirroredIndex:
    """An external vector store kept a mirror of the records (:mod:`kbsync.sync.mirror`)."""

    mirrored = True
    keeps_fresh_vectors = True

    def __init__(self, store: Indexed, sink: VectorSink) -> None:
        self.store = store
        self.sink = sink
        self._deferred = False

    def begin(self, dimension: int) -> bool:
        replay_outbox(self.store, self.sink)
        self.store.prepare_vectors(dimension)  # the records' full text, the cache's index
        return prepare(self.sink, dimension)

    def transaction(self) -> AbstractContextManager[None]:
        # The outbox protocol commits each document between its sink writes.
        return contextlib.nullcontext()

    def write(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              skip: Collection[str]) -> IndexWrite:
        return write_document(self.store, self.sink, source, doc, vectors, embedder, now, skip,
                              defer_deletes=self._deferred)

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        """Old points are deleted from the sink once the enclosing transaction has committed
        the records that no longer name them (a crash before leaves them in the outbox,
        which the next sync replays); deleted before, a rolled-back batch would leave
        records naming points that are gone."""
        self._deferred = True
        try:
            yield
        finally:
            self._deferred = False
        replay_outbox(self.store, self.sink)

    def end(self, rewrite: bool, embedder: str, dimension: int) -> None:
        if rewrite:
            reconcile(self.store, self.sink, embedder, dimension, repair=True)
        self.store.finish_vectors(dimension)

    def nearest(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                filters: Filters | None = None, norm: VectorNorm | None = None) -> Nearest:
        """Ranked by the sink; filtered, it is handed the ids of the matching documents'
        points and ranks among those only (the records hold the metadata).

        The sink's vectors are its own: they are checked against the records by
        :meth:`reconcile`, not here (``norm`` is not used)."""
        if filters:
            ids = set(payloads(self.store.indexed_chunks(filters=filters), embedder))
            near = self.sink.search(vector, k + _SPARE_HITS, ids)
        else:  # a sink written before filters existed needs no ``ids``
            near = self.sink.search(vector, k + _SPARE_HITS)
        found = [(h.payload, h.score) for h in near if h.payload is not None]
        refs = [(p.source, p.key, p.index, p.digest) for p, _ in found]
        return Nearest(self.store.hits_at(refs, [score for _, score in found])[:k])

    def reconcile(self, embedder: str, dimension: int, *,
                  repair: bool = False) -> Reconciliation | None:
        return reconcile(self.store, self.sink, embedder, dimension, repair=repair)

    def erase(self, embedder: str, pattern: str) -> None:
        erase_points(self.store, self.sink, embedder, pattern)

    def close(self) -> None:
        self.sink.close()


def index_for(store: Indexed, sink: VectorSink | None) -> VectorIndex:
    """The index of a store: mirrored into ``sink`` when one is configured."""
    return EmbeddedIndex(store) if sink is None else MirroredIndex(store, sink)
