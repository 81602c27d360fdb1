"""The typed results of :class:`~kbsync.app.knowledge_base.KnowledgeBase`'s operations: frozen
values, each with ``to_dict`` where a command prints it as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbsync.app.status import RunSummary, Status
from kbsync.model import ChangeKind, ChangeReport, FieldChange, Verdict
from kbsync.report import SyncResult

__all__ = [
    "ChangedRegion",
    "Collected",
    "DocumentDiff",
    "DocumentRef",
    "Erased",
    "Erasure",
    "HistoryEntry",
    "Rebuilt",
    "RunSummary",
    "Status",
    "Verification",
    "field_dict",
]


@dataclass(frozen=True, slots=True, order=True)
class DocumentRef:
    """A document of the knowledge base: its source's name and its key (path or URL).

    References order by source, then key: the order of :meth:`KnowledgeBase.documents`.
    """

    source: str
    key: str


@dataclass(frozen=True, slots=True)
class ChangedRegion:
    """A run ``[offset, offset + length)`` of a text that the last change made or removed."""

    offset: int
    length: int
    text: str


@dataclass(frozen=True, slots=True)
class DocumentDiff:
    """The last change of a document: its current and previous text and how they differ.

    ``verdict`` routes the change (cosmetic, an ordinary edit, or a text so different
    that the extraction deserves a look); ``kind`` says what the edit is (cosmetic or
    substantive) and ``reason`` the change that decides it (``number 950 → 975``);
    ``similarity`` is in [0, 1]; ``regions`` are
    the runs of the current text the change made and ``removed`` the runs of the
    previous text it took out. A document known in one version only has nothing to
    compare with: ``first_version`` is true, ``previous``, ``verdict``, ``kind``,
    ``similarity`` and ``change`` are ``None`` and there are no regions.
    ``metadata`` is the document's metadata now (values as typed); ``fields`` are the
    fields its last recorded metadata change set, changed or removed, with their values
    before and after, and ``fields_changed`` when that was (the sync's end): a
    metadata-only change leaves the texts as they were, and shows there
    (``metadata_last``).
    """

    source: str
    key: str
    title: str | None
    last_changed: str
    """When the current text was stored: the last change, or the first sight."""
    verdict: Verdict | None
    similarity: float | None
    regions: tuple[ChangedRegion, ...]
    text: str
    previous: str | None
    change: ChangeReport | None
    """The full comparison (added, removed, kept and moved byte chunks)."""
    removed: tuple[ChangedRegion, ...] = ()
    """Runs of ``previous`` that the change took out."""
    moved_from: str | None = None
    """The key the document had before its last move (a rename), if it ever moved."""
    moved: str | None = None
    """When it last moved."""
    kind: ChangeKind | None = None
    reason: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    fields: tuple[FieldChange, ...] = ()
    fields_changed: str | None = None
    metadata_last: bool = False
    """Whether the last change recorded of the document was to its metadata only."""

    @property
    def first_version(self) -> bool:
        """Whether the document has no previous version, so no change to show."""
        return self.previous is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (without the full texts)."""
        return {"key": self.key, "source": self.source, "title": self.title,
                "last_changed": self.last_changed, "first_version": self.first_version,
                "verdict": None if self.verdict is None else str(self.verdict),
                "kind": None if self.kind is None else str(self.kind),
                "reason": self.reason,
                "similarity": self.similarity,
                "regions": [{"offset": r.offset, "length": r.length, "text": r.text}
                            for r in self.regions],
                "removed": [{"offset": r.offset, "length": r.length, "text": r.text}
                            for r in self.removed],
                "moved_from": self.moved_from, "moved": self.moved,
                "metadata": dict(self.metadata),
                "fields": [field_dict(f) for f in self.fields],
                "fields_changed": self.fields_changed, "metadata_last": self.metadata_last}


@dataclass(frozen=True, slots=True)
class Verification:
    """The result of checking every invariant of the store and the vector store.

    ``problems`` are those found; ``remaining`` those still there afterwards, which
    differ only when the check was asked to repair (see :meth:`KnowledgeBase.verify`);
    ``repaired`` says what the repair of the store did, one line per step.
    """

    problems: tuple[str, ...]
    remaining: tuple[str, ...]
    repaired: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the knowledge base is sound now (after any repair)."""
        return not self.remaining


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """What :meth:`KnowledgeBase.rebuild` did: the fresh store's sync, the cached vectors
    it kept (``salvaged``), how many of those the sync used instead of embedding again
    (``reused``), and where the old store file was kept (``backup``)."""

    result: SyncResult
    salvaged: int
    reused: int
    backup: Path


@dataclass(frozen=True, slots=True)
class Erased:
    """The documents an erasure removed, with every row, text and vector derived from them."""

    documents: tuple[DocumentRef, ...]


@dataclass(frozen=True, slots=True)
class Erasure:
    """A remembered erasure (a tombstone): syncs skip the keys it covers.

    ``pattern`` is the glob as :meth:`KnowledgeBase.erase` was given it; for an
    exact key (``key_hash``), only the key's hash (``blake2b:…``) is kept, so that
    no byte of an erased key stays in the store.
    """

    pattern: str
    created: str
    """When ``kbsync erase`` recorded it (UTC, ISO 8601)."""
    key_hash: bool = False


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One run's change to a document, as the run's report recorded it."""

    run: int
    finished: str
    source: str
    action: str
    verdict: str | None
    similarity: float | None
    regions: int
    kind: str | None = None
    """``cosmetic`` or ``substantive``; None for a run recorded before edits were classified."""
    reason: str = ""
    fields: tuple[FieldChange, ...] = ()
    """The metadata fields the change set, changed or removed, with their values."""


@dataclass(frozen=True, slots=True)
class Collected:
    """What garbage collection removed: a count per kind of row (store-specific names)."""

    removed: Mapping[str, int]


def field_dict(change: FieldChange) -> dict[str, str | None]:
    """JSON-ready data of a metadata field's change."""
    return {"field": change.field, "before": change.before, "after": change.after}
