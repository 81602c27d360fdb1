"""A document's plan written by its action: the one dispatch every store shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum

from kbsync.core.plan import Action, DocumentPlan

__all__ = ["PlanWrites", "WriteKind", "write_kind"]


class WriteKind(Enum):
    """The kind of write a document's plan asks of a store, in the order a group of plans
    is written: moves first (a new version may take the key one frees), deletions last."""

    MOVE = 1
    VERSION = 2
    """A new document, or the next generation of one."""
    RECHUNK = 3
    """The same text in new chunks."""
    REFRESH = 4
    """The same text and chunks: a new stat, new validators or new metadata."""
    DELETE = 5


def write_kind(doc: DocumentPlan) -> WriteKind:
    """The kind of write ``doc``'s plan asks for."""
    if doc.action is Action.DELETED:
        return WriteKind.DELETE
    if doc.action is Action.MOVED:
        return WriteKind.MOVE
    if doc.action in (Action.METADATA, Action.UNCHANGED):  # same text, same chunks
        return WriteKind.REFRESH
    if doc.action is Action.RECHUNKED and not doc.reread:  # a reread text is a new version
        return WriteKind.RECHUNK
    return WriteKind.VERSION


class PlanWrites(ABC):
    """A store's writes of one document, a method for each kind of change;
    :meth:`_write_plan` calls the one a plan's action asks for (within the caller's
    transaction)."""

    def _write_plan(self, source: str, doc: DocumentPlan, now: str) -> None:
        kind = write_kind(doc)
        if kind is WriteKind.DELETE:
            self._delete(source, doc.key)
        elif kind is WriteKind.MOVE:
            self._move(source, doc, now)
        elif kind is WriteKind.REFRESH:
            self._refresh(source, doc, now)
        elif kind is WriteKind.RECHUNK:
            self._rechunk(source, doc, now)
        else:
            self._write_version(source, doc, now)

    @abstractmethod
    def _delete(self, source: str, key: str) -> None:
        """Remove the document, its chunks, texts and vectors' references."""

    @abstractmethod
    def _move(self, source: str, doc: DocumentPlan, now: str) -> None:
        """Give the record at ``doc.previous_key`` its new key (and, if edited, its new
        version)."""

    @abstractmethod
    def _refresh(self, source: str, doc: DocumentPlan, now: str) -> None:
        """Refresh the stat, validators and metadata of a document whose text is the same."""

    @abstractmethod
    def _rechunk(self, source: str, doc: DocumentPlan, now: str) -> None:
        """Replace the current chunks of a document whose text is the same."""

    @abstractmethod
    def _write_version(self, source: str, doc: DocumentPlan, now: str) -> None:
        """Write a new version of the document (a new one, or the next generation)."""
