"""The store's connection: opening, configuring and migrating the file, transactions, damage."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kbsync.core.identity import embedding_text_key
from kbsync.crashpoints import crashpoint
from kbsync.errors import SchemaError, StoreError
from kbsync.model import VectorNorm
from kbsync.store.guard import READ_ONLY, is_damage, reported_damage, store_error
from kbsync.store.sql import SqlBase
from kbsync.store.sql.digests import recount
from kbsync.store.sqlite.ann import ANN_ABOVE, AnnIndexes
from kbsync.store.sqlite.dialect import SqliteDialect
from kbsync.store.sqlite.files import (
    BUSY_SECONDS,
    damage_note,
    noted_damage,
    prepare_state,
    writable,
)
from kbsync.store.sqlite.schema import (
    DIGEST_COUNTS_VERSION,
    MIGRATIONS,
    PAGE_SIZE,
    SCHEMA_VERSION,
    WAL_BYTES,
)

if TYPE_CHECKING:  # NumPy is imported where vectors are read or written
    import numpy as np
    import numpy.typing as npt

__all__ = ["SqliteBase"]


class SqliteBase(SqlBase):
    """One SQLite file opened as a store; the tables of each role are mixins over it, and over
    the SQL core through its dialect (:class:`~kbsync.store.sqlite.dialect.SqliteDialect`)."""

    _dialect: SqliteDialect

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection (the dialect's: both are replaced together)."""
        return self._dialect.conn

    @_db.setter
    def _db(self, conn: sqlite3.Connection) -> None:
        if "_dialect" in vars(self):
            self._dialect.conn = conn
        else:
            self._dialect = SqliteDialect(conn)
        self._counting_ready = False  # a new connection has no temporary tables yet

    def __init__(self, path: str | Path, *, read_only: bool = False,
                 ann_above: int = ANN_ABOVE) -> None:
        self.path = Path(path)
        memory = str(path) == ":memory:"
        #: Whether the store is open for reading only (writes fail with a StoreError).
        self.read_only = read_only or (not memory and self.path.exists()
                                       and not writable(self.path))
        self._memory = memory
        self._damage: str | None = None  # a store in memory remembers damage here
        if not memory and not self.read_only:
            new = not self.path.exists()
            prepare_state(self.path)
            if new:  # a note beside a file moved away (or rebuilt) is not this file's
                self.remember_damage(None)
        self._batched = False
        self._db = self._connect()
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            self._db.close()
            raise SchemaError(
                f"{self.path}: schema version {version} is newer than this kbsync knows "
                f"({SCHEMA_VERSION}); upgrade kbsync. Nothing was written."
            )
        if self.read_only and version < SCHEMA_VERSION:
            self._db.close()
            raise StoreError(f"{self.path}: schema version {version} needs an upgrade to "
                             f"{SCHEMA_VERSION}, and {READ_ONLY}")
        self._configure()
        if version < SCHEMA_VERSION:
            self._migrate(version)
        self._vectors: dict[str, tuple[npt.NDArray[np.float32], list[int]]] = {}
        # Each matrix's chunk ids as an array, their sort, and the ids sorted.
        self._vector_orders: dict[str, tuple[list[int], npt.NDArray[np.int64],
                                             npt.NDArray[np.intp], npt.NDArray[np.int64]]] = {}
        # The norm each cached matrix was checked against, and the sorted chunk ids of
        # the vectors it left out as unsound (see SearchTables._vector_matrix).
        self._unsound: dict[str, tuple[VectorNorm, npt.NDArray[np.int64]]] = {}
        self._data_version = -1
        # The approximate index of each embedder's vectors, derived from the matrix above
        # ann_above chunks (0: never); see kbsync.store.sqlite.ann.
        self._ann = AnnIndexes(ann_above)

    def _connect(self) -> sqlite3.Connection:
        """The connection, its schema readable; a file that is no SQLite store is refused.

        Read-only, a WAL store whose shared-memory file cannot be created (its folder
        is immutable or on a read-only mount) is opened as immutable instead.
        """
        if self.read_only:
            uri = self.path.resolve().as_uri()
            targets = [f"{uri}?mode=ro", f"{uri}?immutable=1"]
        else:
            targets = [str(self.path)]
        failure: sqlite3.Error | None = None
        for target in targets:
            try:
                # One store is used by one thread at a time (the watch loop runs in its own).
                db = sqlite3.connect(target, isolation_level=None, timeout=BUSY_SECONDS,
                                     check_same_thread=False, uri=self.read_only)
            except sqlite3.Error as exc:
                raise store_error(str(self.path), exc, "cannot open the store") from exc
            db.row_factory = sqlite3.Row
            # The migration that keys the stored chunk texts calls it.
            db.create_function("kbsync_text_key", 1, embedding_text_key, deterministic=True)
            try:
                db.execute("PRAGMA user_version").fetchone()
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return db
            except sqlite3.DatabaseError as exc:
                db.close()
                failure = exc
                if not isinstance(exc, sqlite3.OperationalError):
                    break  # the file itself is wrong, not how it was opened
        assert failure is not None
        if isinstance(failure, sqlite3.OperationalError):
            raise store_error(str(self.path), failure, "cannot open the store") from failure
        # Its header or schema is unreadable, so neither repair nor rebuild can salvage it.
        raise StoreError(f"{self.path}: not a kbsync store ({failure}); if it was one, it is "
                         "damaged beyond repair: move it away and run `kbsync sync` to build "
                         "a new one (everything is embedded again)") from failure

    def _configure(self) -> None:
        # A 64 MB page cache (the default is 2 MB): the stat gate and the vector
        # check of a no-op sync probe indexes that outgrow the small one.
        pragmas: tuple[str, ...] = ("foreign_keys = ON", "cache_size = -65536")
        if not self.read_only:
            # The page size takes effect only in a new, empty file (an existing store
            # keeps its own): 16 KB pages hold a few vectors each and mean fewer pages
            # to write for the same rows.
            pragmas = (f"page_size = {PAGE_SIZE}", *pragmas, "synchronous = NORMAL",
                       "secure_delete = ON")
        for pragma in pragmas:
            self._db.execute(f"PRAGMA {pragma}")
        if not self.read_only:
            self._write_ahead()
            # A checkpoint copies the write-ahead log into the file and syncs it, and a
            # page that changes again before it is copied once: SQLite's default, every
            # 1000 pages, made a first sync copy its B-tree pages over and over.
            page = self._db.execute("PRAGMA page_size").fetchone()[0]
            self._db.execute(f"PRAGMA wal_autocheckpoint = {max(1000, WAL_BYTES // page)}")

    def _write_ahead(self) -> None:
        """Switch the file to write-ahead logging, waiting for whoever else opens it.

        A new file starts in rollback mode, and processes that open it together race to
        switch it. SQLite refuses the switch at once, without waiting out its busy
        timeout, to the one that read the file before another switched it and began
        writing the schema: so it is tried again until :data:`BUSY_SECONDS` pass.
        """
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            try:
                self._db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self, version: int) -> None:
        with self._transaction():
            # Another process may have migrated while we waited for the write lock.
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            for step in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[step].split(";"):
                    if statement.strip():
                        _execute_step(self._db, statement)
            if version < DIGEST_COUNTS_VERSION:
                recount(self._dialect)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def batch(self) -> Iterator[None]:
        if self._batched:  # already inside one: the outer batch commits
            yield
            return
        with self._transaction():
            self._batched = True
            try:
                yield
            finally:
                self._batched = False

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a database or I/O error (a full disk) is a StoreError.

        Whatever fails before the commit, nothing of the transaction is kept. Inside
        :meth:`batch` it is part of the batch's transaction, committed with it.
        """
        if self._batched:
            yield self._db
            return
        try:
            crashpoint("store.begin")
            self._before_begin()
            self._db.execute("BEGIN IMMEDIATE")
            yield self._db
            self._before_commit()
            crashpoint("store.commit")
            self._db.execute("COMMIT")
            self._after_commit()
            crashpoint("store.committed")
        except BaseException as exc:
            if self._db.in_transaction:  # SQLite may have rolled back already (SQLITE_FULL)
                self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error | OSError):
                if is_damage(exc):  # as the guard does for the errors it turns into words
                    self.remember_damage(reported_damage(exc))
                raise store_error(str(self.path), exc, "cannot write the store") from exc
            raise

    def close(self) -> None:
        self._db.close()

    def known_damage(self) -> str | None:
        if self._memory:
            return self._damage
        return noted_damage(self.path)

    def remember_damage(self, reason: str | None) -> None:
        if self._memory:
            self._damage = reason
            return
        note = damage_note(self.path)
        try:
            if reason is None:
                note.unlink(missing_ok=True)
                return
            # Owner-only, as every file of the state directory.
            fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(" ".join(reason.split()) + "\n")
        except OSError:
            pass  # a read-only store cannot remember; its reads still fail where damaged


def _execute_step(db: sqlite3.Connection, statement: str) -> None:
    """One statement of a migration; a column it adds that the table has already is kept.

    Why: SQLite has no ``ADD COLUMN IF NOT EXISTS``, and a store rewound to an older
    version (as tests do, to check a migration) has the columns added since.
    """
    try:
        db.execute(statement)
    except sqlite3.OperationalError as exc:
        if "duplicate column name" not in str(exc):
            raise
