"""The embedded record store: one SQLite file in WAL mode, vectors inside it.

Records and vectors of a document commit in one transaction, so a crash never
leaves a chunk without its vector or a vector without its chunk. The schema
version lives in ``PRAGMA user_version``; a newer one than this code knows is
refused before anything is written.

A store that cannot be written (a read-only mount, an immutable file or
folder) is opened read-only: it can be searched and inspected, and a write
fails with one line that says so. Every driver error of a public method
reaches the caller as a one-line :class:`StoreError` (see :mod:`kbsync.store.guard`).

The store is the SQL core (:mod:`kbsync.store.sql`) over SQLite's dialect
(:mod:`~kbsync.store.sqlite.dialect`) and connection (:mod:`~kbsync.store.sqlite.connection`),
with a mixin for each of what is SQLite's own: its full-text rows and big texts
(``documents``), compaction (``erasure``), ``search``, and checks and ``repair`` of the
file; the schema is in :mod:`~kbsync.store.sqlite.schema` and the file's life on disk in
:mod:`~kbsync.store.sqlite.files`.
"""

from __future__ import annotations

from kbsync.store.guard import guarded, sqlite_or_os_error
from kbsync.store.sql import SqlStore
from kbsync.store.sqlite.erasure import ErasureTables
from kbsync.store.sqlite.files import (
    carry_erasures,
    rebuild_file,
    remove_rebuild_leftovers,
    salvage_embeddings,
    swap_in,
)
from kbsync.store.sqlite.repair import RepairTables
from kbsync.store.sqlite.schema import SCHEMA_VERSION
from kbsync.store.sqlite.search import SearchTables

__all__ = ["SCHEMA_VERSION", "SqliteStore", "carry_erasures", "rebuild_file",
           "remove_rebuild_leftovers", "salvage_embeddings", "swap_in"]


@guarded(lambda store: str(store.path), sqlite_or_os_error)
class SqliteStore(ErasureTables, SearchTables, RepairTables, SqlStore):
    """A :class:`~kbsync.store.RecordStore` in one SQLite file.

    ``read_only`` opens it for reading only; a store whose file or folder cannot
    be written is opened so anyway (see :attr:`read_only`).
    """
