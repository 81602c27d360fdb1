"""The stored values of the SQLite store checked (:mod:`kbsync.store.values`), and the damaged
ones discarded so that a repair makes them again: the SQL core's checks
(:mod:`kbsync.store.sql.checks`) over SQLite's connection."""

from __future__ import annotations

from kbsync.store.sql.checks import CheckTables
from kbsync.store.sqlite.connection import SqliteBase

__all__ = ["ValueChecks"]


class ValueChecks(SqliteBase, CheckTables):
    """Checking what the tables hold, row by row as they are read (never all at once)."""
