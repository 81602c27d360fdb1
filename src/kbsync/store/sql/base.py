"""The base of every store of the SQL core: its dialect, transactions and the hooks its tables call.

Each role's tables (:mod:`kbsync.store.sql`) are a mixin over this base; a backend
gives the dialect and overrides what is its own (how it opens, its transactions,
its full text and text storage), through the hooks below.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from kbsync.core.plan import DocumentVersion
from kbsync.crashpoints import crashpoint
from kbsync.store.sql.dialect import Dialect

__all__ = ["SqlBase"]


class SqlBase:
    """A store over one :class:`~kbsync.store.sql.dialect.Dialect`.

    The default transaction is the plainest: a nested one joins the outermost, which
    alone commits (with the crash points every store marks its commits with).
    """

    _dialect: Dialect
    _depth: int = 0

    def _transaction(self) -> AbstractContextManager[Any]:
        """One write transaction; inside another, part of it."""
        return self._joined()

    @contextmanager
    def _joined(self) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        crashpoint("store.begin")
        self._before_begin()
        self._dialect.begin()
        self._depth = 1
        try:
            yield
            self._before_commit()
            crashpoint("store.commit")
            self._dialect.commit()
        except BaseException:
            self._dialect.rollback()
            raise
        finally:
            self._depth = 0
        self._after_commit()
        crashpoint("store.committed")

    @contextmanager
    def batch(self) -> Iterator[None]:
        with self._transaction():
            yield

    def _grouping(self) -> AbstractContextManager[Any]:
        """A scope whose documents' applies may wait to be written together at its end (a
        batch's, on a backend that binds sets of rows; see
        :meth:`~kbsync.store.sql.documents.DocumentTables.apply`)."""
        return nullcontext()

    @contextmanager
    def _applying(self) -> Iterator[None]:
        """The transaction a plan's documents are written in (a batch's, inside one)."""
        with self._transaction():
            yield

    @property
    def total_changes(self) -> int:
        """Rows changed through this store (tests assert idempotency with it)."""
        return self._dialect.changes

    # -- hooks: what a backend does besides the shared tables -----------------------------

    def _before_begin(self) -> None:
        """Before the outermost write transaction begins (outside it: nothing rolls this
        back). Every backend's transaction calls it."""

    def _before_commit(self) -> None:
        """The outermost write transaction's last writes, just before it commits (what its
        writes noted, written once). Every backend's transaction calls it."""

    def _after_commit(self) -> None:
        """The outermost write transaction committed. Every backend's transaction calls it."""

    def _invalidate(self) -> None:
        """What the store keeps in memory of its vectors and chunks is stale (its writes
        changed them)."""

    def _vectors_arriving(self, dimensions: Collection[int]) -> None:
        """Vectors of ``dimensions`` are about to be inserted (an index per dimension)."""

    def _dropping_chunks(self, source: str, keys: Sequence[str]) -> None:
        """The current chunks of these documents are about to be deleted or replaced."""

    def _chunks_written(self, source: str,
                        versions: Sequence[tuple[str, DocumentVersion]]) -> None:
        """The current chunks of these (key, version) documents were written."""

    def _retitled(self, source: str, keys: Sequence[str]) -> None:
        """These documents may have a new title (their chunks are the same)."""

    def _erasing(self, source: str, key: str) -> None:
        """The document is being erased (in the transaction that deletes it)."""

    def _compact(self) -> None:
        """After a collection: leave no deleted row's bytes behind, give the space back."""

    def _compact_erased(self) -> None:
        """After an erasure and its collection: whatever else could keep a copy of what was
        erased is rewritten."""
