"""Record stores: documents, chunks, texts, the embedding cache and runs, behind one protocol.

:class:`RecordStore` is the union of narrow roles (:class:`Manifest`,
:class:`EmbeddingCache`, :class:`SearchIndex`, :class:`Mirror`, :class:`RunLog`,
:class:`Meta`, :class:`Erasures`, :class:`Maintenance`), each what one kind of
caller uses (:mod:`~kbsync.store.roles`); a status reads only :class:`StatusReads`
(:mod:`~kbsync.store.status`). Each name is imported on first use, so that a status, which
must start at once, creates none of the other roles' classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsync.lazy import names_on_first_use

if TYPE_CHECKING:
    from kbsync.store.roles import (
        ChunkRef,
        Discarded,
        DocumentText,
        EmbeddingCache,
        Erasures,
        Frontier,
        Hit,
        Maintenance,
        Manifest,
        Meta,
        Mirror,
        Nearest,
        RecordStore,
        RunLog,
        RunRecord,
        Schedules,
        SearchIndex,
        Window,
    )
    from kbsync.store.status import StatusReads, StoreStatus

__all__ = [
    "ChunkRef",
    "Discarded",
    "DocumentText",
    "EmbeddingCache",
    "Erasures",
    "Frontier",
    "Hit",
    "Maintenance",
    "Manifest",
    "Meta",
    "Mirror",
    "Nearest",
    "RecordStore",
    "RunLog",
    "RunRecord",
    "Schedules",
    "SearchIndex",
    "StatusReads",
    "StoreStatus",
    "Window",
]

_HOMES = {
    "kbsync.store.roles": (
        "ChunkRef", "Discarded", "DocumentText", "EmbeddingCache", "Erasures", "Frontier", "Hit",
        "Maintenance", "Manifest", "Meta", "Mirror", "Nearest", "RecordStore", "RunLog",
        "RunRecord", "Schedules", "SearchIndex", "Window",
    ),
    "kbsync.store.status": ("StatusReads", "StoreStatus"),
}


__getattr__ = names_on_first_use(__name__, _HOMES)
"""A name of the package, imported from its module on first use."""
