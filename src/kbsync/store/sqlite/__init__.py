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
file, gathered by :mod:`~kbsync.store.sqlite.store`; the schema is in
:mod:`~kbsync.store.sqlite.schema` and the file's life on disk in
:mod:`~kbsync.store.sqlite.files`. A status is read from the file without opening the store
(:mod:`~kbsync.store.sqlite.status`): each name here is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsync.lazy import names_on_first_use

if TYPE_CHECKING:
    from kbsync.store.sqlite.files import (
        carry_erasures,
        rebuild_file,
        remove_rebuild_leftovers,
        salvage_embeddings,
        swap_in,
    )
    from kbsync.store.sqlite.schema import SCHEMA_VERSION
    from kbsync.store.sqlite.store import SqliteStore

__all__ = ["SCHEMA_VERSION", "SqliteStore", "carry_erasures", "rebuild_file",
           "remove_rebuild_leftovers", "salvage_embeddings", "swap_in"]

_HOMES = {
    "kbsync.store.sqlite.schema": ("SCHEMA_VERSION",),
    "kbsync.store.sqlite.store": ("SqliteStore",),
    "kbsync.store.sqlite.files": (
        "carry_erasures", "rebuild_file", "remove_rebuild_leftovers", "salvage_embeddings",
        "swap_in",
    ),
}


__getattr__ = names_on_first_use(__name__, _HOMES)
"""A name of the package, imported from its module on first use."""
