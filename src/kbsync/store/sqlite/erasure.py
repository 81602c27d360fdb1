"""Compaction after a collection or an erasure: what is erased leaves no byte behind."""

from __future__ import annotations

import sqlite3

from kbsync.crashpoints import crashpoint
from kbsync.store.guard import store_error
from kbsync.store.sqlite.documents import DocumentTables

__all__ = ["ErasureTables"]


class ErasureTables(DocumentTables):
    """How the SQLite store gives back what gc and erase (:mod:`kbsync.store.sql.maintenance`)
    deleted."""

    def _compact(self) -> None:
        # Deleted rows can live on in full-text segments, free pages and the WAL: merge
        # the segments, rewrite the file and empty the WAL so no byte of them is left.
        for point, sql in (("store.fts_optimize", "INSERT INTO chunk_fts (chunk_fts) "
                                                  "VALUES ('optimize')"),
                           ("store.vacuum", "VACUUM"),
                           ("store.checkpoint", "PRAGMA wal_checkpoint(TRUNCATE)")):
            try:
                crashpoint(point)
                self._db.execute(sql)
            except (sqlite3.Error, OSError) as exc:
                raise store_error(str(self.path), exc, "cannot compact the store") from exc
