"""The store's connection: the driver loaded lazily, transactions, damage, the writer lock."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kbsync.crashpoints import crashpoint
from kbsync.errors import DependencyMissingError, LockedError, SchemaError, StoreError
from kbsync.store.guard import guarded
from kbsync.store.postgres.dialect import PostgresDialect
from kbsync.store.postgres.schema import (
    ANN_ABOVE,
    DIGEST_COUNTS_VERSION,
    MIGRATIONS,
    SCHEMA_VERSION,
)
from kbsync.store.sql import SqlBase
from kbsync.store.sql.digests import recount

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DAMAGE_META", "AdvisoryLock", "PostgresBase", "connect", "ident", "is_driver_error",
    "load_psycopg", "scalar", "shown",
]


DAMAGE_META = "damage"
"""The meta row that remembers why the store is known to be damaged (see
:meth:`~kbsync.store.Maintenance.known_damage`)."""


def load_psycopg() -> Any:
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        raise DependencyMissingError("The PostgreSQL store", "postgres",
                                     exc.name or "psycopg", exc) from exc
    return psycopg, register_vector


def connect(url: str, password: str | None, schema: str | None, *,
             create: bool = True) -> psycopg.Connection[Any]:
    driver, _ = load_psycopg()
    options: dict[str, Any] = {"autocommit": True}
    if password is not None:
        options["password"] = password
    try:
        conn: psycopg.Connection[Any] = driver.connect(url, **options)
    except driver.Error as exc:
        raise StoreError(f"{shown(url)}: cannot connect: {exc}".strip()) from exc
    if schema is not None:
        if create:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {ident(schema)}")
        conn.execute(f"SET search_path TO {ident(schema)}, public")
    return conn


def _meta_of(schema: str | None) -> str:
    """The name of the ``meta`` table of a store in ``schema`` (None: the default one)."""
    return "meta" if schema is None else f"{ident(schema)}.meta"


def ident(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name):
        raise StoreError(f"{name!r} is not a valid schema name (letters, digits, underscore)")
    return f'"{name}"'


def shown(url: str) -> str:
    """The URL without a password, for messages."""
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)


def is_driver_error(exc: BaseException) -> bool:
    """A ``psycopg`` error (the driver is imported lazily, so its classes are not at hand)."""
    return any(c.__module__.startswith("psycopg") for c in type(exc).__mro__)


def scalar(conn: psycopg.Connection[Any], sql: str, args: Sequence[Any] = ()) -> Any:
    """The first column of the first row of a query that always returns one."""
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row[0]


def _holder(conn: psycopg.Connection[Any], key: str) -> str | None:
    """The server process that holds the advisory lock ``key``, as words, or None."""
    row = conn.execute("SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' "
                       "AND l.objid = hashtext(%s)::oid AND l.granted LIMIT 1", (key,)).fetchone()
    return None if row is None else f"server process {row[0]}"


class PostgresBase(SqlBase):
    """A PostgreSQL database (one schema of it) opened as a store; each role's tables are a
    mixin over it, and over the SQL core through its dialect
    (:class:`~kbsync.store.postgres.dialect.PostgresDialect`)."""

    _dialect: PostgresDialect

    def __init__(self, url: str, *, password: str | None = None, schema: str | None = None,
                 create: bool = True, index_memory: str | None = None,
                 ann_above: int = ANN_ABOVE) -> None:
        self.url = url
        self._password = password
        self.schema = schema
        self._meta = _meta_of(schema)
        self.index_memory = index_memory
        # The HNSW index of a dimension is built once it holds more vectors than this
        # (0: never); below, a vector search compares every vector (kbsync.store.postgres.indexes).
        self.ann_above = ann_above
        self._dialect = PostgresDialect(connect(url, password, schema, create=create))
        self._depth = 0  # nested transactions: only the outermost one commits
        self._damage: str | None = None  # damage this process could not write down
        try:
            self._open(create)
        except BaseException:
            self._conn.close()
            raise

    def _open(self, create: bool) -> None:
        driver, register_vector = load_psycopg()
        conn = self._conn
        with conn.transaction():
            # One migrating process at a time; the others wait here, then see the new version.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('kbsync:migrate'))")
            version = self._version()
            if version > SCHEMA_VERSION:
                raise SchemaError(
                    f"{shown(self.url)}: schema version {version} is newer than this kbsync "
                    f"knows ({SCHEMA_VERSION}); upgrade kbsync. Nothing was written."
                )
            if version < SCHEMA_VERSION and not create and version == 0:
                raise StoreError(f"{shown(self.url)}: no kbsync store here yet; run "
                                 "`kbsync sync` first")
            if version < SCHEMA_VERSION:
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
                except driver.Error as exc:
                    raise StoreError(f"{shown(self.url)}: the pgvector extension is not "
                                     f"available: {exc}") from exc
                crashpoint("store.migrate")
                for step in range(version, SCHEMA_VERSION):
                    conn.execute(MIGRATIONS[step])
                if version < DIGEST_COUNTS_VERSION:
                    recount(self._dialect)
                conn.execute(
                    "INSERT INTO meta (name, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),))
        register_vector(conn)

    def _has_index(self, name: str) -> bool:
        """Whether the store's schema has the index ``name`` (asked each time: another
        process may have built it, at the end of its sync)."""
        return bool(scalar(self._conn, "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE "
                                       "schemaname = current_schema() AND indexname = %s)",
                           (name,)))

    def _version(self) -> int:
        # In the store's own schema only: the search path goes on to public (pgvector's
        # types live there), and public's meta, another knowledge base's, found there made
        # a new schema look migrated, so every write went to public's tables.
        if scalar(self._conn, "SELECT to_regclass(%s)", (self._meta,)) is None:
            return 0
        row = self._conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        return 0 if row is None else int(row[0])

    @staticmethod
    def exists(url: str, *, password: str | None = None, schema: str | None = None) -> bool:
        """Whether the database (schema) holds kbsync's tables; creates nothing."""
        conn = connect(url, password, None)
        try:
            return scalar(conn, "SELECT to_regclass(%s)", (_meta_of(schema),)) is not None
        finally:
            conn.close()

    @property
    def _conn(self) -> psycopg.Connection[Any]:
        return self._dialect.conn

    def close(self) -> None:
        self._conn.close()

    def _queue(self, sql: str, args: Sequence[Any]) -> None:
        """A write whose row count is only needed later: in a pipeline it does not wait."""
        cur = self._conn.cursor()
        cur.execute(sql, args)
        self._dialect.sent(cur)

    def _write(self, sql: str, args: Iterable[Any] | Mapping[str, Any] = ()) -> int:
        count = self._conn.execute(sql, args).rowcount  # type: ignore[arg-type]
        self._dialect.count(count)
        return int(count)

    def _write_many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(sql, list(rows))  # type: ignore[arg-type]
            self._dialect.count(cur.rowcount)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction; inside another (a batch, a claim) a part of it, as in SQLite.

        No savepoint for the inner one: a failure inside fails the outer transaction,
        whose writes are all or nothing, and a savepoint per document cost a batch two
        round trips to the server per document. The crash points mark the outermost
        one's start and commit, as SQLite's do.
        """
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        crashpoint("store.begin")
        self._before_begin()
        self._depth += 1
        try:
            with self._conn.transaction():
                yield
                self._before_commit()
                crashpoint("store.commit")
        finally:
            self._depth -= 1
        self._after_commit()
        crashpoint("store.committed")

    @contextmanager
    def batch(self) -> Iterator[None]:
        # Pipelined, as a worker's claimed batch is: the statements of a batch's documents
        # go to the server together, and the batch waits for it when it reads, not once
        # per document. Its documents are written together at its end, each kind of
        # write one statement for the lot rather than one per document.
        with self._dialect.pipeline(), self._transaction(), self._grouping():
            yield

    @contextmanager
    def _applying(self) -> Iterator[None]:
        # Pipelined: the statements of a plan go to the server together and its
        # transaction waits for the server once, not once per statement. None of them
        # needs an earlier one's result (rows are found by (source, key)), except a move
        # whose origin may be gone.
        with self._dialect.pipeline(), self._transaction():
            yield

    def lock(self, *, wait: bool = True,
             on_wait: Callable[[str], None] | None = None) -> AdvisoryLock:
        """The writer lock of this knowledge base: an advisory lock on a connection of its own."""
        return AdvisoryLock(self.url, self._password, self.schema, wait=wait, on_wait=on_wait)

    def known_damage(self) -> str | None:
        driver, _ = load_psycopg()
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE name = %s",
                                     (DAMAGE_META,)).fetchone()
        except driver.Error:  # inside a transaction the damage aborted
            return self._damage
        return self._damage if row is None else str(row[0])

    def remember_damage(self, reason: str | None) -> None:
        """Written through a connection of its own: the damage may have aborted a transaction
        of this one (a batch), and the note must outlive it."""
        said = None if reason is None else " ".join(reason.split())
        driver, _ = load_psycopg()
        try:
            with connect(self.url, self._password, self.schema, create=False) as conn:
                if said is None:
                    conn.execute("DELETE FROM meta WHERE name = %s", (DAMAGE_META,))
                else:
                    conn.execute("INSERT INTO meta (name, value) VALUES (%s, %s) ON CONFLICT "
                                 "(name) DO UPDATE SET value = excluded.value",
                                 (DAMAGE_META, said))
            self._damage = None
        except (driver.Error, StoreError):
            self._damage = said  # not written: this process still knows (and says so)


@guarded(lambda lock: shown(lock.url), is_driver_error)
class AdvisoryLock:
    """The writer lock of a PostgreSQL store: an advisory lock held by a connection of its own.

    The server drops it when that connection ends, so a killed sync never
    leaves a stuck lock, on any machine.
    """

    def __init__(self, url: str, password: str | None, schema: str | None, *,
                 wait: bool = True, on_wait: Callable[[str], None] | None = None,
                 poll: float = 0.2) -> None:
        self.url, self._password, self.schema = url, password, schema
        self.wait, self.on_wait, self.poll = wait, on_wait, poll
        self._conn: psycopg.Connection[Any] | None = None

    @property
    def _key(self) -> str:
        return "kbsync:writer:" + (self.schema or "")

    def acquire(self) -> None:
        crashpoint("lock.acquire")
        conn = connect(self.url, self._password, self.schema)
        told = False
        while not scalar(conn, "SELECT pg_try_advisory_lock(hashtext(%s))", (self._key,)):
            holder = _holder(conn, self._key)
            who = f" ({holder})" if holder else ""
            if not self.wait:
                conn.close()
                raise LockedError(f"another kbsync process{who} is writing to this knowledge "
                                  f"base ({shown(self.url)})")
            if not told and self.on_wait is not None:
                self.on_wait(f"waiting for another kbsync process{who} to finish…")
                told = True
            time.sleep(self.poll)
        self._conn = conn
        crashpoint("lock.acquired")

    def holder(self) -> str | None:
        """The server process of the writer that holds the lock now, or None when it is free."""
        with connect(self.url, self._password, self.schema) as conn:
            return _holder(conn, self._key)

    def release(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                crashpoint("lock.release")
            finally:
                conn.close()  # closing the connection releases the lock

    def __enter__(self) -> AdvisoryLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
