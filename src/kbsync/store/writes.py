"""A document's plan written by its action: the one dispatch every store shares."""

from __future__ import annotations

from abc import ABC, abstractmethod

from kbsync.core.plan import Action, DocumentPlan

__all__ = ["PlanWrites"]


class PlanWrites(ABC):
    """A store's writes of one document, a method for each kind of change;
    :meth:`_write_plan` calls the one a plan's action asks for (within the caller's
    transaction)."""

    def _write_plan(self, source: str, doc: DocumentPlan, now: str) -> None:
        if doc.action is Action.DELETED:
            self._delete(source, doc.key)
        elif doc.action is Action.MOVED:
            self._move(source, doc, now)
        elif doc.action in (Action.METADATA, Action.UNCHANGED):  # same text, same chunks
            self._refresh(source, doc, now)
        elif doc.action is Action.RECHUNKED and not doc.reread:
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
