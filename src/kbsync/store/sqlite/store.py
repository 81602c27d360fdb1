"""The SQLite store: the SQL core over SQLite's connection, with a mixin for each of what
is SQLite's own (see :mod:`kbsync.store.sqlite`)."""

from __future__ import annotations

from kbsync.store.guard import guarded, sqlite_or_os_error
from kbsync.store.sql import SqlStore
from kbsync.store.sqlite.erasure import ErasureTables
from kbsync.store.sqlite.repair import RepairTables
from kbsync.store.sqlite.search import SearchTables

__all__ = ["SqliteStore"]


@guarded(lambda store: str(store.path), sqlite_or_os_error)
class SqliteStore(ErasureTables, SearchTables, RepairTables, SqlStore):
    """A :class:`~kbsync.store.RecordStore` in one SQLite file.

    ``read_only`` opens it for reading only; a store whose file or folder cannot
    be written is opened so anyway (see :attr:`read_only`).
    """
