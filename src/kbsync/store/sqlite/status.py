"""A status read from a SQLite store's file without opening the store: its counts, its last
run and its known damage.

Why: ``kbsync status`` runs in shell prompts and cron checks and must start at once, and
opening the store imports its search, repair and approximate-index mixins and readies the
file for writing, where a status only reads. A file this does not read as a current store
(none yet, a schema to migrate or newer than this kbsync, an error of the database) is left
to the store, which migrates it or says what is wrong
(:meth:`~kbsync.store.kinds.StoreKind.open_status`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from kbsync.store import StoreStatus
from kbsync.store.sql.status import store_status
from kbsync.store.sqlite.dialect import SqliteDialect
from kbsync.store.sqlite.files import BUSY_SECONDS, noted_damage, refuse_shared

__all__ = ["READS_VERSION", "StatusFile", "read_status_file"]

READS_VERSION = 16
"""The schema version whose tables these reads know. It is written here, not taken from
:data:`~kbsync.store.sqlite.schema.SCHEMA_VERSION`, whose module names the chunking core;
a test keeps the two equal."""


@dataclass(frozen=True, slots=True)
class StatusFile:
    """The status of a store's file, read once: a :class:`~kbsync.store.StatusReads`."""

    found: StoreStatus
    damage: str | None

    def status(self) -> StoreStatus:
        return self.found

    def known_damage(self) -> str | None:
        return self.damage

    def close(self) -> None:
        """Nothing to close: the file was closed once read."""


def read_status_file(path: Path) -> StatusFile | None:
    """The status of the SQLite store ``path``, read in one read transaction of a read-only
    connection; None where the store must be opened to read it (see the module)."""
    if not path.is_file():
        return None
    refuse_shared(path.parent, path.parent.stat().st_mode)  # as opening the store refuses it
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                             timeout=BUSY_SECONDS, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != READS_VERSION:
            return None
        db.execute("BEGIN")  # the counts of one snapshot, whatever a sync commits meanwhile
        found = store_status(SqliteDialect(db))
        db.execute("COMMIT")
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return StatusFile(found, noted_damage(path))
