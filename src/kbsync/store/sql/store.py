"""The SQL core's store: every role of a record store but search, over a dialect."""

from __future__ import annotations

from kbsync.store.sql.checks import CheckTables
from kbsync.store.sql.manifest import ManifestTables

__all__ = ["SqlStore"]


class SqlStore(CheckTables, ManifestTables):
    """Every role of a record store but :class:`~kbsync.store.SearchIndex`, over the
    store's dialect (``_dialect``); a backend adds its search, ``close`` and what it
    keeps its own way."""
