"""The typed results of :class:`~kbsync.app.knowledge_base.KnowledgeBase`'s operations: frozen
values, each with ``to_dict`` where a command prints it as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbsync.model import ChangeKind, ChangeReport, Verdict
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
]


@dataclass(frozen=True, slots=True, order=True)
class DocumentRef:
    """A document of the knowledge base: its source's name and its key (path or URL).

    References order by source, then key: the order of :meth:`KnowledgeBase.documents`.
    """

    source: str
    key: str


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The last recorded sync: when it ran and its document counts per action."""

    started: str
    finished: str
    documents: Mapping[str, int]
    interrupted: bool = False
    """Whether it stopped before its end (Ctrl-C, SIGTERM, a refusal, an error)."""
    applied: int = 0
    """Documents it wrote to the store."""
    failures: tuple[tuple[str, str, str], ...] = ()
    """``(source, key, message)`` of each document it could not take (as its report kept them)."""
    unlisted: tuple[str, ...] = ()
    """The sources it could not list in full (a folder gone, a site down): it deleted
    nothing of them, so their documents are those of an earlier listing."""


@dataclass(frozen=True, slots=True)
class Status:
    """What the knowledge base holds, and how it is configured."""

    config: Path
    """The ``kbsync.toml`` file."""
    sources: tuple[str, ...]
    """The configured sources' names."""
    embedder: str
    """The identity of the configured embedder (model, parameters, dimension)."""
    documents: int
    chunks: int
    """Chunks of the current generation of every document."""
    embeddings: int
    """Vectors in the embedding cache (all embedders)."""
    runs: int
    by_source: Mapping[str, int]
    """Documents per source."""
    last_run: RunSummary | None
    writer: str | None = None
    """The process writing to the knowledge base now (a sync, say: ``"pid 123"``), if any."""
    damage: str | None = None
    """Why the store is known to be damaged (a check failed, or the database said so), if it
    is: writes wait for ``kbsync verify --repair`` or ``kbsync rebuild``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "config": str(self.config), "sources": list(self.sources), "embedder": self.embedder,
            "documents": self.documents, "chunks": self.chunks, "embeddings": self.embeddings,
            "runs": self.runs, "by_source": dict(self.by_source), "writer": self.writer,
            "damage": self.damage,
            "last_run": None if self.last_run is None else {
                "started": self.last_run.started, "finished": self.last_run.finished,
                "documents": dict(self.last_run.documents),
                "interrupted": self.last_run.interrupted, "applied": self.last_run.applied,
                "failures": [{"source": s, "key": k, "message": m}
                             for s, k, m in self.last_run.failures],
                "unlisted": list(self.last_run.unlisted)},
        }


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
    ``similarity`` and ``change`` are ``None`` and there are no regions. The texts are
    compared: a change of the document's metadata shows in the run's report (and
    :meth:`~kbsync.app.knowledge_base.KnowledgeBase.history`), not here.
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
                "moved_from": self.moved_from, "moved": self.moved}


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


@dataclass(frozen=True, slots=True)
class Collected:
    """What garbage collection removed: a count per kind of row (store-specific names)."""

    removed: Mapping[str, int]
