"""The scale-out record store: PostgreSQL, with pgvector for vectors and tsvector for full text.

The logical schema is the SQLite store's (documents with at most two chunk
generations, content-addressed chunk texts, the embedding cache, runs,
boilerplate, meta), so a sync behaves the same on either. Records and vectors
of a document commit in one transaction.

Vectors of different embedders and dimensions share one ``embeddings`` table
with an untyped ``vector`` column: an HNSW index needs a fixed dimension, so
each dimension gets its own partial expression index
(``(vector::vector(N)) WHERE dimension = N``), made the first time vectors of
that dimension arrive. One table keeps the cache a single key space
(digest, embedder) and lets an embedder change add vectors beside the old ones
without any DDL beyond that index; a table per dimension would make every
cache lookup and the garbage collection a union over tables.

Full text is a generated ``tsvector`` column of ``chunk_texts`` with a GIN
index: it is derived from the text in the same row, so it cannot drift from it
(SQLite's FTS5 table can, and its verify checks that).

The schema version lives in ``meta``; a newer one than this code knows is
refused before anything is written. The work queue of parallel workers
(:mod:`kbsync.sync.parallel`) lives here too: a claim is a row lock taken with
``FOR UPDATE SKIP LOCKED`` in the transaction that also applies the document,
so a worker that dies releases its claim and leaves nothing half-written.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kbsync.crashpoints import crashpoint
from kbsync.errors import DependencyMissingError, LockedError, SchemaError, StoreError
from kbsync.identity import embedding_text_key, embedding_text_key_sql
from kbsync.model import PageSchedule
from kbsync.plan import Action, ChunkDraft, DocumentPlan, StoredDocument
from kbsync.store import ChunkRef, DocumentText, Hit, RunRecord, StoreStatus, Window, invariants
from kbsync.store.filters import Filters, postgres_condition
from kbsync.store.guard import guarded
from kbsync.store.rows import (
    CURRENT,
    DIMENSION_PREFIX,
    HIT_COLUMNS,
    INDEXED,
    MANIFEST_COLUMNS,
    as_hit,
    by_text_key,
    erased,
    held_meta_name,
    query_terms,
    run_record,
    stat_row,
    stored_document,
    validator_row,
    window_span,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "AdvisoryLock", "Claim", "PostgresStore"]

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE documents (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        locator TEXT NOT NULL,
        media_type TEXT NOT NULL,
        size BIGINT, mtime_ns BIGINT, inode BIGINT,
        etag TEXT, last_modified TEXT,
        bytes_hash TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        derivation TEXT NOT NULL,
        title TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL DEFAULT 'ok',
        generation INTEGER NOT NULL,
        first_seen TEXT NOT NULL,
        last_seen TEXT NOT NULL,
        last_changed TEXT NOT NULL,
        missing INTEGER NOT NULL DEFAULT 0,
        UNIQUE (source, key)
    );
    CREATE TABLE chunks (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        generation INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        digest TEXT NOT NULL,
        section INTEGER NOT NULL,
        heading TEXT,
        start INTEGER NOT NULL,
        "end" INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        boundary TEXT NOT NULL,
        UNIQUE (doc_id, generation, idx)
    );
    CREATE INDEX chunks_digest ON chunks (digest);
    CREATE TABLE chunk_texts (
        digest TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
    );
    CREATE INDEX chunk_texts_tsv ON chunk_texts USING gin (tsv);
    CREATE TABLE texts (
        doc_id BIGINT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
        text TEXT NOT NULL,
        previous TEXT
    );
    CREATE TABLE embeddings (
        digest TEXT NOT NULL,
        embedder TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        vector vector NOT NULL,
        PRIMARY KEY (digest, embedder)
    );
    CREATE TABLE runs (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        started TEXT NOT NULL,
        finished TEXT NOT NULL,
        report TEXT NOT NULL
    );
    CREATE TABLE boilerplate (
        source TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (source, digest)
    );
    """,
    # 2: the work queue of parallel workers (one row per document of a run).
    """
    CREATE TABLE work (
        run TEXT NOT NULL,
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        state TEXT NOT NULL,
        item JSONB,
        result JSONB,
        PRIMARY KEY (run, source, key)
    );
    CREATE INDEX work_state ON work (run, state);
    -- Claims take the first waiting row in key order without sorting the whole run.
    CREATE INDEX work_todo ON work (run, source, key) WHERE state = 'todo';
    """,
    # 3: the outbox: ids of external vectors to delete, committed with the records.
    """
    CREATE TABLE outbox (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        vector_id TEXT NOT NULL UNIQUE
    );
    """,
    # 4: the frontier: keys a source found but could not take yet, tried again next time.
    """
    CREATE TABLE frontier (
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        PRIMARY KEY (source, key)
    );
    """,
    # 5: erasures (tombstones): key patterns `kbsync erase` removed, which no sync brings back.
    """
    CREATE TABLE erasures (pattern TEXT PRIMARY KEY, created TEXT NOT NULL);
    """,
    # 6: full text with English stemming ("retries" finds "retry"), as SQLite's porter
    # tokenizer does; search weights a chunk's heading above its body (_HEADING_WEIGHT).
    """
    ALTER TABLE chunk_texts DROP COLUMN tsv;
    ALTER TABLE chunk_texts
        ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED;
    CREATE INDEX chunk_texts_tsv ON chunk_texts USING gin (tsv);
    """,
    # 7: revisit schedules of web pages (kbsync.schedule): when each page was last
    # checked and seen changed, its interval, and the hash and type of its last body.
    """
    CREATE TABLE schedules (
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        checked DOUBLE PRECISION NOT NULL,
        changed DOUBLE PRECISION NOT NULL,
        interval_seconds DOUBLE PRECISION NOT NULL,
        digest TEXT NOT NULL,
        media_type TEXT NOT NULL,
        PRIMARY KEY (source, key)
    );
    """,
    # 8: the key each document had before its last move, and when it moved.
    """
    CREATE TABLE moves (
        doc_id BIGINT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
        moved_from TEXT NOT NULL,
        moved TEXT NOT NULL
    );
    """,
    # 9: each chunk text's embedding key (kbsync.identity.embedding_text_key), so a chunk
    # whose identity changed but whose text did not finds its vector by the text.
    f"""
    ALTER TABLE chunk_texts ADD COLUMN text_key BYTEA;
    UPDATE chunk_texts SET text_key = {embedding_text_key_sql("text")};
    CREATE INDEX chunk_texts_key ON chunk_texts (text_key);
    """,
    # 10: the dimension of each embedder's vectors kept in meta, where every sync grouped
    # all the vectors to find it.
    f"""
    INSERT INTO meta (name, value)
        SELECT '{DIMENSION_PREFIX}' || embedder, max(dimension)::text FROM embeddings
        GROUP BY embedder ON CONFLICT DO NOTHING;
    """,
)
# The weight class of a chunk's heading in ts_rank (body text is 'D', 0.1; 'C' is 0.2):
# twice the body's, like SQLite's bm25 column weights.
_HEADING_WEIGHT = "C"
SCHEMA_VERSION = len(_MIGRATIONS)
# pgvector indexes `vector` columns of at most 2,000 dimensions with HNSW.
HNSW_MAX_DIMENSION = 2000
# A filtered vector search over at most this many chunks compares each of them (exact,
# and quicker than the index then); a broader filter walks the HNSW index with the
# filter applied to its candidates, asking for more until enough match.
_EXACT_FILTERED_CHUNKS = 20_000


def _psycopg() -> Any:
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        raise DependencyMissingError("The PostgreSQL store", "postgres",
                                     exc.name or "psycopg", exc) from exc
    return psycopg, register_vector


def _connect(url: str, password: str | None, schema: str | None, *,
             create: bool = True) -> psycopg.Connection[Any]:
    driver, _ = _psycopg()
    options: dict[str, Any] = {"autocommit": True}
    if password is not None:
        options["password"] = password
    try:
        conn: psycopg.Connection[Any] = driver.connect(url, **options)
    except driver.Error as exc:
        raise StoreError(f"{_shown(url)}: cannot connect: {exc}".strip()) from exc
    if schema is not None:
        if create:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(schema)}")
        conn.execute(f"SET search_path TO {_ident(schema)}, public")
    return conn


def _ident(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name):
        raise StoreError(f"{name!r} is not a valid schema name (letters, digits, underscore)")
    return f'"{name}"'


def _shown(url: str) -> str:
    """The URL without a password, for messages."""
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)


@dataclass(frozen=True, slots=True)
class Claim:
    """One document of a run, claimed by this worker until its transaction ends."""

    run: str
    source: str
    key: str
    item: Mapping[str, Any]


def _driver_error(exc: BaseException) -> bool:
    """A ``psycopg`` error (the driver is imported lazily, so its classes are not at hand)."""
    return any(c.__module__.startswith("psycopg") for c in type(exc).__mro__)


@guarded(lambda store: _shown(store.url), _driver_error)
class PostgresStore:
    """A :class:`~kbsync.store.RecordStore` in a PostgreSQL database (one schema of it).

    ``password`` comes from the caller (an environment variable named in the
    configuration); without it libpq reads ``PGPASSWORD``, a service file or
    ``~/.pgpass``. ``schema`` keeps several knowledge bases in one database.
    With ``create`` false a database without kbsync's tables is an error
    instead of being set up. ``index_memory`` is the ``maintenance_work_mem`` of
    building a vector index (such as ``"1GB"``): an HNSW graph that does not fit
    in it is built on disk, many times more slowly; without it the server's
    setting holds.
    """

    def __init__(self, url: str, *, password: str | None = None, schema: str | None = None,
                 create: bool = True, index_memory: str | None = None) -> None:
        self.url = url
        self._password = password
        self.schema = schema
        self.index_memory = index_memory
        self._conn = _connect(url, password, schema, create=create)
        self._changes = 0
        self._depth = 0  # nested transactions: only the outermost one commits
        self._queued: list[psycopg.Cursor[Any]] = []
        self._indexed_dimensions: set[int] = set()
        self._deferred_dimensions: set[int] = set()
        try:
            self._open(create)
        except BaseException:
            self._conn.close()
            raise

    # -- lifecycle -------------------------------------------------------------------

    def _open(self, create: bool) -> None:
        driver, register_vector = _psycopg()
        conn = self._conn
        with conn.transaction():
            # One migrating process at a time; the others wait here, then see the new version.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('kbsync:migrate'))")
            version = self._version()
            if version > SCHEMA_VERSION:
                raise SchemaError(
                    f"{_shown(self.url)}: schema version {version} is newer than this kbsync "
                    f"knows ({SCHEMA_VERSION}); upgrade kbsync. Nothing was written."
                )
            if version < SCHEMA_VERSION and not create and version == 0:
                raise StoreError(f"{_shown(self.url)}: no kbsync store here yet; run "
                                 "`kbsync sync` first")
            if version < SCHEMA_VERSION:
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
                except driver.Error as exc:
                    raise StoreError(f"{_shown(self.url)}: the pgvector extension is not "
                                     f"available: {exc}") from exc
                crashpoint("store.migrate")
                for step in range(version, SCHEMA_VERSION):
                    conn.execute(_MIGRATIONS[step])
                conn.execute(
                    "INSERT INTO meta (name, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),))
        register_vector(conn)
        self._indexed_dimensions = {int(r[0]) for r in conn.execute(
            "SELECT substring(indexname FROM 'embeddings_hnsw_([0-9]+)') FROM pg_indexes "
            "WHERE schemaname = current_schema() AND indexname LIKE 'embeddings_hnsw_%'")}

    def _version(self) -> int:
        if _scalar(self._conn, "SELECT to_regclass('meta')") is None:
            return 0
        row = self._conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        return 0 if row is None else int(row[0])

    @staticmethod
    def exists(url: str, *, password: str | None = None, schema: str | None = None) -> bool:
        """Whether the database (schema) holds kbsync's tables; creates nothing."""
        conn = _connect(url, password, None)
        try:
            where = "meta" if schema is None else f"{_ident(schema)}.meta"
            return _scalar(conn, "SELECT to_regclass(%s)", (where,)) is not None
        finally:
            conn.close()

    def close(self) -> None:
        self._conn.close()

    @property
    def total_changes(self) -> int:
        """Rows inserted, updated or deleted through this store (idempotency tests use it)."""
        self._count_queued()
        return self._changes

    def _queue(self, sql: str, args: Sequence[Any]) -> None:
        """A write whose row count is only needed later: in a pipeline it does not wait."""
        cur = self._conn.cursor()
        cur.execute(sql, args)
        self._queued.append(cur)

    def _count_queued(self) -> None:
        """Count the rows of queued writes (their results have arrived by now)."""
        for cur in self._queued:
            self._changes += max(cur.rowcount, 0)
        self._queued.clear()

    def _write(self, sql: str, args: Iterable[Any] | Mapping[str, Any] = ()) -> int:
        count = self._conn.execute(sql, args).rowcount  # type: ignore[arg-type]
        self._changes += max(count, 0)
        return int(count)

    def _write_many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(sql, list(rows))  # type: ignore[arg-type]
            self._changes += max(cur.rowcount, 0)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction; inside another (a batch, a claim) a savepoint of it.

        The crash points mark the outermost one's start and commit, as SQLite's do.
        """
        outermost = self._depth == 0
        if outermost:
            crashpoint("store.begin")
        self._depth += 1
        try:
            with self._conn.transaction():
                yield
                if outermost:
                    crashpoint("store.commit")
        finally:
            self._depth -= 1
        if outermost:
            crashpoint("store.committed")

    @contextmanager
    def batch(self) -> Iterator[None]:
        with self._transaction():
            yield

    def lock(self, *, wait: bool = True,
             on_wait: Callable[[str], None] | None = None) -> AdvisoryLock:
        """The writer lock of this knowledge base: an advisory lock on a connection of its own."""
        return AdvisoryLock(self.url, self._password, self.schema, wait=wait, on_wait=on_wait)

    # -- meta ------------------------------------------------------------------------

    def get_meta(self, name: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE name = %s", (name,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, name: str, value: str) -> None:
        if value == "":
            if self.get_meta(name) is not None:
                crashpoint("store.set_meta")
                self._write("DELETE FROM meta WHERE name = %s", (name,))
        elif self.get_meta(name) != value:
            crashpoint("store.set_meta")
            self._write("INSERT INTO meta (name, value) VALUES (%s, %s) "
                        "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (name, value))

    # -- reading ---------------------------------------------------------------------

    _MANIFEST = f"SELECT {MANIFEST_COLUMNS} FROM documents "

    def manifest(self, source: str, after: str | None = None,
                 limit: int | None = None) -> dict[str, StoredDocument]:
        rows = self._conn.execute(
            self._MANIFEST + "WHERE source = %s AND key > %s ORDER BY key LIMIT %s",
            (source, "" if after is None else after, limit))
        return {r[0]: stored_document(r) for r in rows}

    def stored(self, source: str, key: str) -> StoredDocument | None:
        """One stored document with its chunk digests (what a worker plans against)."""
        row = self._conn.execute(
            f"SELECT {MANIFEST_COLUMNS}, ARRAY(SELECT c.digest FROM chunks c WHERE {CURRENT} "
            "ORDER BY c.idx) FROM documents d WHERE source = %s AND key = %s",
            (source, key)).fetchone()
        if row is None:
            return None
        return replace(stored_document(row), chunk_digests=tuple(row[-1]))

    def with_digests(self, source: str, docs: Collection[StoredDocument]) -> list[StoredDocument]:
        digests: dict[str, list[str]] = {}
        keys = [d.key for d in docs]
        for i in range(0, len(keys), 1000):
            for key, dig in self._conn.execute(
                f"SELECT d.key, c.digest FROM documents d JOIN chunks c ON {CURRENT} "
                "WHERE d.source = %s AND d.key = ANY(%s) ORDER BY d.key, c.idx",
                (source, keys[i : i + 1000]),
            ):
                digests.setdefault(key, []).append(dig)
        return [replace(d, chunk_digests=tuple(digests.get(d.key, ()))) for d in docs]

    def cached(self, embedder: str, digests: Collection[str]) -> set[str]:
        items = list(digests)
        found: set[str] = set()
        for i in range(0, len(items), 5000):
            found.update(r[0] for r in self._conn.execute(
                "SELECT digest FROM embeddings WHERE embedder = %s AND digest = ANY(%s)",
                (embedder, items[i : i + 5000])))
        return found

    # -- writing ---------------------------------------------------------------------

    def apply(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              outbox: Collection[str] = ()) -> None:
        if not doc.writes:
            return
        # Pipelined: the statements of a document go to the server together and its
        # transaction waits for the server once, not once per statement. None of them
        # needs an earlier one's result (rows are found by (source, key)), except a move
        # whose origin may be gone.
        with self._conn.pipeline(), self._transaction():
            self._insert_vectors(embedder, vectors)
            if outbox:
                crashpoint("store.write_outbox")
                self._queue("INSERT INTO outbox (vector_id) SELECT unnest(%s::text[]) "
                            "ORDER BY 1 ON CONFLICT DO NOTHING", (sorted(outbox),))
            if doc.action is Action.DELETED:
                self._delete(source, doc.key)
            elif doc.action is Action.MOVED:
                self._move(source, doc, now)
            elif doc.action in (Action.METADATA, Action.UNCHANGED):  # same text, same chunks
                self._refresh(source, doc, now)
            elif doc.action is Action.RECHUNKED:
                self._rechunk(source, doc, now)
            else:
                self._write_version(source, doc, now)
        self._count_queued()

    def pending_outbox(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT vector_id FROM outbox ORDER BY id")]

    def clear_outbox(self, ids: Collection[str]) -> None:
        if ids:
            crashpoint("store.clear_outbox")
            self._write("DELETE FROM outbox WHERE vector_id = ANY(%s)", (list(ids),))

    def _delete(self, source: str, key: str) -> None:
        crashpoint("store.delete_document")
        self._queue("DELETE FROM documents WHERE source = %s AND key = %s", (source, key))
        # A replacement held for it would name a document that is gone.
        self._queue("DELETE FROM meta WHERE name = %s", (held_meta_name(source, key),))
        self._queue("DELETE FROM schedules WHERE source = %s AND key = %s", (source, key))

    def _move(self, source: str, doc: DocumentPlan, now: str) -> None:
        version = doc.version
        assert version is not None
        assert doc.previous_key is not None
        # The same text keeps its last_changed; an edited one gets its new version below.
        crashpoint("store.move_document")
        moved = self._conn.execute(
            "UPDATE documents SET key = %s, locator = %s, media_type = %s, size = %s, "
            "mtime_ns = %s, inode = %s, etag = %s, last_modified = %s, bytes_hash = %s, "
            "title = %s, metadata = %s, missing = 0, last_seen = %s "
            "WHERE source = %s AND key = %s RETURNING id",
            (doc.key, version.locator, version.media_type, *stat_row(version.stat),
             *validator_row(version.validators), version.bytes_hash, version.title,
             version.metadata, now, source, doc.previous_key),
        ).fetchone()
        if moved is not None:
            self._changes += 1
            self._queue("INSERT INTO moves (doc_id, moved_from, moved) VALUES (%s, %s, %s) "
                        "ON CONFLICT (doc_id) DO UPDATE SET moved_from = excluded.moved_from, "
                        "moved = excluded.moved", (moved[0], doc.previous_key, now))
        if moved is None or doc.edited:  # an edit, or the old row is gone (then it is new)
            self._write_version(source, doc, now)

    def _refresh(self, source: str, doc: DocumentPlan, now: str) -> None:
        version = doc.version
        crashpoint("store.refresh_document")
        if version is None:  # gate 2 or a 304: same content, new stat or validators
            self._queue(
                "UPDATE documents SET size = %s, mtime_ns = %s, inode = %s, etag = %s, "
                "last_modified = %s, missing = 0 WHERE source = %s AND key = %s",
                (*stat_row(doc.stat), *validator_row(doc.validators), source, doc.key),
            )
            return
        self._queue(
            "UPDATE documents SET locator = %s, media_type = %s, size = %s, mtime_ns = %s, "
            "inode = %s, etag = %s, last_modified = %s, bytes_hash = %s, title = %s, "
            "metadata = %s, missing = 0, last_seen = %s WHERE source = %s AND key = %s",
            (version.locator, version.media_type, *stat_row(version.stat),
             *validator_row(version.validators), version.bytes_hash, version.title,
             version.metadata, now, source, doc.key),
        )

    def _write_version(self, source: str, doc: DocumentPlan, now: str) -> None:
        """A new version: one upsert of the document row, then its text and chunks, which
        find that row by (source, key), so no statement waits for another's result."""
        version = doc.version
        assert version is not None
        this = (source, doc.key)
        crashpoint("store.write_document")
        # A new document starts at generation 1; a known one goes one generation up and
        # keeps its first_seen.
        self._queue(
            "INSERT INTO documents (source, key, locator, media_type, size, mtime_ns, inode, "
            "etag, last_modified, bytes_hash, text_hash, derivation, title, metadata, "
            "generation, first_seen, last_seen, last_changed) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 1, %s, %s, %s) "
            "ON CONFLICT (source, key) DO UPDATE SET locator = excluded.locator, "
            "media_type = excluded.media_type, size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, inode = excluded.inode, etag = excluded.etag, "
            "last_modified = excluded.last_modified, bytes_hash = excluded.bytes_hash, "
            "text_hash = excluded.text_hash, derivation = excluded.derivation, "
            "title = excluded.title, metadata = excluded.metadata, "
            "generation = documents.generation + 1, missing = 0, "
            "last_seen = excluded.last_seen, last_changed = excluded.last_changed",
            (*this, version.locator, version.media_type, *stat_row(version.stat),
             *validator_row(version.validators), version.bytes_hash, version.text_hash,
             version.derivation, version.title, version.metadata, now, now, now))
        # At most two generations: the new one and the one before it.
        crashpoint("store.drop_old_chunks")
        self._queue("DELETE FROM chunks c USING documents d WHERE d.source = %s AND d.key = %s "
                    "AND c.doc_id = d.id AND c.generation < d.generation - 1", this)
        crashpoint("store.write_text")
        self._queue(
            "INSERT INTO texts (doc_id, text) SELECT id, %s FROM documents "
            "WHERE source = %s AND key = %s ON CONFLICT (doc_id) DO UPDATE "
            "SET previous = texts.text, text = excluded.text", (version.text, *this))
        self._write_chunks(source, doc.key, version.chunks)

    def _rechunk(self, source: str, doc: DocumentPlan, now: str) -> None:
        """The same text in new chunks: the current generation's chunks are replaced, so
        its text, its previous text and when it last changed stay as they were."""
        version = doc.version
        assert version is not None
        crashpoint("store.write_document")
        self._queue(
            "UPDATE documents SET locator = %s, media_type = %s, size = %s, mtime_ns = %s, "
            "inode = %s, etag = %s, last_modified = %s, bytes_hash = %s, derivation = %s, "
            "title = %s, metadata = %s, missing = 0, last_seen = %s "
            "WHERE source = %s AND key = %s",
            (version.locator, version.media_type, *stat_row(version.stat),
             *validator_row(version.validators), version.bytes_hash, version.derivation,
             version.title, version.metadata, now, source, doc.key),
        )
        crashpoint("store.drop_old_chunks")
        self._queue("DELETE FROM chunks c USING documents d WHERE d.source = %s AND d.key = %s "
                    "AND c.doc_id = d.id AND c.generation = d.generation", (source, doc.key))
        self._write_chunks(source, doc.key, version.chunks)

    def _write_chunks(self, source: str, key: str, chunks: Sequence[ChunkDraft]) -> None:
        """The current generation's chunks of the document, and their texts."""
        this = (source, key)
        # Shared rows are inserted in digest order, so concurrent workers never deadlock.
        texts = sorted({c.digest: c.text for c in chunks}.items())
        if texts:
            crashpoint("store.write_chunk_texts")
            self._queue(
                "INSERT INTO chunk_texts (digest, text, text_key) SELECT * FROM "
                "unnest(%s::text[], %s::text[], %s::bytea[]) AS u (digest, text, text_key) "
                "ORDER BY digest ON CONFLICT DO NOTHING",
                ([d for d, _ in texts], [t for _, t in texts],
                 [embedding_text_key(t) for _, t in texts]))
        if chunks:
            crashpoint("store.write_chunks")
            self._queue(
                "INSERT INTO chunks (doc_id, generation, idx, digest, section, heading, start, "
                '"end", tokens, boundary) SELECT d.id, d.generation, u.* FROM documents d, '
                "unnest(%s::int[], %s::text[], %s::int[], %s::text[], %s::int[], %s::int[], "
                "%s::int[], %s::text[]) AS u WHERE d.source = %s AND d.key = %s",
                (list(range(len(chunks))), [c.digest for c in chunks],
                 [c.section for c in chunks], [c.heading for c in chunks],
                 [c.start for c in chunks], [c.end for c in chunks],
                 [c.tokens for c in chunks], [c.boundary for c in chunks], *this))

    def chunk_digests(self, source: str) -> Iterator[tuple[str, str]]:
        # Row by row from the server, not the whole result in the client first.
        yield from self._conn.cursor().stream(
            f"SELECT d.key, c.digest FROM documents d JOIN chunks c ON {CURRENT} "
            "WHERE d.source = %s", (source,),
        )

    def boilerplate(self, source: str) -> frozenset[str]:
        return frozenset(r[0] for r in self._conn.execute(
            "SELECT digest FROM boilerplate WHERE source = %s", (source,)))

    def set_boilerplate(self, source: str, digests: Collection[str]) -> None:
        if self.boilerplate(source) == frozenset(digests):
            return
        with self._transaction():
            self._write("DELETE FROM boilerplate WHERE source = %s", (source,))
            crashpoint("store.write_boilerplate")
            self._write_many("INSERT INTO boilerplate (source, digest) VALUES (%s, %s)",
                             [(source, d) for d in sorted(digests)])

    def frontier(self, source: str) -> frozenset[str]:
        return frozenset(r[0] for r in self._conn.execute(
            "SELECT key FROM frontier WHERE source = %s", (source,)))

    def set_frontier(self, source: str, keys: Collection[str]) -> None:
        if self.frontier(source) == frozenset(keys):
            return
        with self._transaction():
            self._write("DELETE FROM frontier WHERE source = %s", (source,))
            crashpoint("store.write_frontier")
            self._write_many("INSERT INTO frontier (source, key) VALUES (%s, %s)",
                             [(source, k) for k in sorted(keys)])

    def schedules(self, source: str) -> dict[str, PageSchedule]:
        return {r[0]: PageSchedule(*r[1:]) for r in self._conn.execute(
            "SELECT key, checked, changed, interval_seconds, digest, media_type FROM schedules "
            "WHERE source = %s", (source,))}

    def set_schedules(self, source: str, schedules: Mapping[str, PageSchedule],
                      replace: bool) -> None:
        with self._transaction():
            if replace:
                self._write("DELETE FROM schedules WHERE source = %s", (source,))
            crashpoint("store.write_schedules")
            self._write_many(
                "INSERT INTO schedules "
                "(source, key, checked, changed, interval_seconds, digest, media_type) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (source, key) DO UPDATE SET "
                "checked = excluded.checked, changed = excluded.changed, "
                "interval_seconds = excluded.interval_seconds, digest = excluded.digest, "
                "media_type = excluded.media_type",
                [(source, k, s.checked, s.changed, s.interval, s.digest, s.media_type)
                 for k, s in sorted(schedules.items())])

    def source_names(self) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT DISTINCT source FROM documents")}

    def unembedded(self, source: str, embedder: str) -> dict[str, str]:
        return dict(self._conn.execute(
            f"SELECT DISTINCT c.digest, t.text FROM documents d JOIN chunks c ON {CURRENT} "
            "JOIN chunk_texts t ON t.digest = c.digest LEFT JOIN embeddings e "
            "ON e.digest = c.digest AND e.embedder = %s "
            f"WHERE d.source = %s AND e.digest IS NULL AND {INDEXED}",
            (embedder, source),
        ).fetchall())

    def adopt_by_text(self, embedder: str, text_keys: Mapping[str, bytes], *,
                      write: bool = True) -> set[str]:
        wanting = by_text_key(text_keys)
        keys = list(wanting)
        holders: dict[bytes, str] = {}  # a text's key -> a digest holding its vector
        for i in range(0, len(keys), 5000):
            holders.update((bytes(key), holder) for key, holder in self._conn.execute(
                "SELECT t.text_key, min(t.digest) FROM chunk_texts t JOIN embeddings e "
                "ON e.digest = t.digest AND e.embedder = %s WHERE t.text_key = ANY(%s) "
                "GROUP BY t.text_key", (embedder, keys[i : i + 5000])))
        # Shared rows are inserted in digest order, so concurrent workers never deadlock.
        found = sorted((digest, holder) for key, holder in holders.items()
                       for digest in wanting[key])
        if write and found:
            with self._transaction():
                crashpoint("store.adopt_vectors")
                self._queue(
                    "INSERT INTO embeddings (digest, embedder, dimension, vector) "
                    "SELECT u.digest, e.embedder, e.dimension, e.vector FROM "
                    "unnest(%s::text[], %s::text[]) AS u (digest, holder) JOIN embeddings e "
                    "ON e.digest = u.holder AND e.embedder = %s ORDER BY u.digest "
                    "ON CONFLICT DO NOTHING",
                    ([d for d, _ in found], [h for _, h in found], embedder))
        return {digest for digest, _ in found}

    def put_vectors(self, embedder: str,
                    vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if vectors:
            with self._transaction():
                self._insert_vectors(embedder, vectors)

    def _insert_vectors(self, embedder: str,
                        vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if not vectors:
            return
        rows = [(d, embedder, int(v.shape[0]), np.asarray(v, dtype=np.float32))
                for d, v in sorted(vectors.items())]
        for dimension in {r[2] for r in rows}:
            self._ensure_index(dimension)
        crashpoint("store.write_vectors")
        # One statement per vector, but pipelined (executemany in a pipeline waits once).
        cur = self._conn.cursor()
        cur.executemany("INSERT INTO embeddings (digest, embedder, dimension, vector) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", rows)
        self._queued.append(cur)
        for dimension in sorted({r[2] for r in rows}):
            self._queue("INSERT INTO meta (name, value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                        (DIMENSION_PREFIX + embedder, str(dimension)))

    def prepare_vectors(self, dimension: int) -> None:
        """Before workers insert vectors of ``dimension``: make its index, or defer it.

        Building an HNSW index over vectors already loaded is several times cheaper
        than growing it one insert at a time, so when there are no vectors of that
        dimension yet (a first sync) the index is deferred to :meth:`finish_vectors`,
        and every process inserting meanwhile sees the deferral in ``meta``.
        """
        if dimension in self._indexed_dimensions or dimension > HNSW_MAX_DIMENSION:
            return
        if _scalar(self._conn, "SELECT count(*) FROM (SELECT 1 FROM embeddings "
                               "WHERE dimension = %s LIMIT 1) x", (dimension,)):
            self._ensure_index(dimension)
        else:
            self.set_meta(f"index_deferred:{dimension}", "1")

    def finish_vectors(self, dimension: int) -> None:
        """Build a deferred index of ``dimension`` (after the workers are done)."""
        if self.get_meta(f"index_deferred:{dimension}") is not None:
            self._ensure_index(dimension, deferred=False)
            crashpoint("store.set_meta")
            self._write("DELETE FROM meta WHERE name = %s", (f"index_deferred:{dimension}",))

    def _ensure_index(self, dimension: int, *, deferred: bool | None = None) -> None:
        """The HNSW index of one dimension, made when its first vectors arrive (unless a
        parallel first sync deferred it)."""
        if dimension in self._indexed_dimensions or dimension > HNSW_MAX_DIMENSION:
            return
        if deferred is None:
            deferred = dimension in self._deferred_dimensions or self.get_meta(
                f"index_deferred:{dimension}") is not None
        if deferred:
            self._deferred_dimensions.add(dimension)
            return
        with self._transaction():
            crashpoint("store.create_index")
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('kbsync:index'))")
            if self.index_memory is not None:
                self._conn.execute("SELECT set_config('maintenance_work_mem', %s, true)",
                                   (self.index_memory,))
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS embeddings_hnsw_{dimension} ON embeddings "
                f"USING hnsw ((vector::vector({dimension})) vector_ip_ops) "
                f"WHERE dimension = {dimension}")
        self._indexed_dimensions.add(dimension)

    def mark_missing(self, source: str, key: str) -> None:
        crashpoint("store.mark_missing")
        self._write("UPDATE documents SET missing = missing + 1 WHERE source = %s AND key = %s",
                    (source, key))

    def record_run(self, started: str, finished: str, report: Mapping[str, Any]) -> int:
        crashpoint("store.record_run")
        run_id = _scalar(
            self._conn,
            "INSERT INTO runs (started, finished, report) VALUES (%s, %s, %s) RETURNING id",
            (started, finished, json.dumps(report, sort_keys=True)))
        self._changes += 1
        return int(run_id)

    def runs(self, limit: int = 50) -> list[RunRecord]:
        rows = self._conn.execute(
            "SELECT id, started, finished, report FROM runs ORDER BY id DESC LIMIT %s",
            (max(limit, 0),)).fetchall()
        return [run_record(r) for r in rows]

    def run(self, run_id: int) -> RunRecord | None:
        row = self._conn.execute(
            "SELECT id, started, finished, report FROM runs WHERE id = %s", (run_id,)).fetchone()
        return run_record(row) if row else None

    # -- search ----------------------------------------------------------------------

    def search_text(self, query: str, k: int, filters: Filters | None = None) -> list[Hit]:
        terms = query_terms(query)
        if not terms:
            return []
        where, args = postgres_condition(filters) if filters else ("TRUE", [])
        tsquery = " || ".join(["plainto_tsquery('english', %s)"] * len(terms))
        # The document's title joins the section heading (as in the SQLite store).
        heading = (f"setweight(to_tsvector('english', coalesce(d.title, '') || ' ' || "
                   f"coalesce(c.heading, '')), '{_HEADING_WEIGHT}')")
        rows = self._conn.execute(
            f"SELECT {HIT_COLUMNS}, ts_rank({heading} || t.tsv, x.q) AS rank "
            f"FROM (SELECT {tsquery} AS q) x "
            "JOIN chunk_texts t ON t.tsv @@ x.q JOIN chunks c ON c.digest = t.digest "
            f"JOIN documents d ON {CURRENT} WHERE {INDEXED} AND {where} "
            "ORDER BY rank DESC, d.source, d.key, c.idx LIMIT %s",
            (*terms, *args, k),
        ).fetchall()
        return [as_hit(r, score=float(r[10])) for r in rows]

    def search_vector(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                      filters: Filters | None = None) -> list[Hit]:
        # One vector's dimension stands for the embedder's (verify checks they agree).
        dims = self._conn.execute(
            "SELECT dimension FROM embeddings WHERE embedder = %s LIMIT 1", (embedder,)
        ).fetchall()
        query = np.asarray(vector, dtype=np.float32)
        if [r[0] for r in dims] != [query.shape[0]]:
            return []
        n = int(query.shape[0])
        typed = f"vector::vector({n})" if n <= HNSW_MAX_DIMENSION else "vector"
        cast = f"::vector({n})" if n <= HNSW_MAX_DIMENSION else "::vector"
        where, args = "TRUE", list[str]()
        if filters:
            where, args = postgres_condition(filters)
            matching = _scalar(self._conn, f"SELECT count(*) FROM documents d JOIN chunks c "
                               f"ON {CURRENT} WHERE {where}", args)
            if matching <= _EXACT_FILTERED_CHUNKS:
                return self._filtered_nearest(embedder, query, k, where, args, typed, cast)
        # Nearest cached vectors first, from the index alone (a join would hide the index
        # from the planner); then the chunks they belong to, if current and not
        # boilerplate (and, filtered, of a matching document). Cache entries of no such
        # chunk can crowd the candidates out, so too few hits means asking again for
        # more, up to every vector (exact).
        candidates = 4 * k + 40
        while True:
            with self._transaction():
                self._conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                self._conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, candidates)}")
                rows = self._conn.execute(
                    f"WITH near AS MATERIALIZED (SELECT digest, {typed} <#> %s{cast} AS distance "
                    f"FROM embeddings WHERE embedder = %s AND dimension = {n} "
                    "ORDER BY distance LIMIT %s) "
                    f"SELECT {HIT_COLUMNS}, e.distance FROM near e "
                    "JOIN chunks c ON c.digest = e.digest "
                    f"JOIN documents d ON {CURRENT} JOIN chunk_texts t ON t.digest = c.digest "
                    f"WHERE {INDEXED} AND {where} "
                    "ORDER BY e.distance, d.source, d.key, c.idx LIMIT %s",
                    (query, embedder, candidates, *args, k),
                ).fetchall()
                total = len(rows) >= k or _scalar(
                    self._conn, "SELECT count(*) <= %s FROM embeddings WHERE embedder = %s",
                    (candidates, embedder))
            if total:
                break
            candidates *= 4
        # <#> is the negated inner product; the score is the inner product, as SQLite's.
        return [as_hit(r, score=-float(r[10])) for r in rows]

    def _filtered_nearest(self, embedder: str, query: npt.NDArray[np.float32], k: int,
                          where: str, args: Sequence[str], typed: str, cast: str) -> list[Hit]:
        """The nearest vectors among the chunks of documents meeting ``where``, exactly.

        The matching documents are found first and only their chunks' vectors are
        compared, so a narrow filter loses nothing to the best of the others (an
        index scan then filtered would) and costs a scan of those chunks only.
        """
        n = int(query.shape[0])
        rows = self._conn.execute(
            f"SELECT {HIT_COLUMNS}, e.{typed} <#> %s{cast} "
            "AS distance FROM documents d "
            f"JOIN chunks c ON {CURRENT} JOIN embeddings e ON e.digest = c.digest "
            f"AND e.embedder = %s AND e.dimension = {n} "
            f"JOIN chunk_texts t ON t.digest = c.digest WHERE {INDEXED} AND {where} "
            "ORDER BY distance, d.source, d.key, c.idx LIMIT %s",
            (query, embedder, *args, k),
        ).fetchall()
        return [as_hit(r, score=-float(r[10])) for r in rows]

    def hits_at(self, refs: Sequence[tuple[str, str, int, str]],
                scores: Sequence[float]) -> list[Hit]:
        if not refs:
            return []
        rows = {(r[0], r[1], r[4], r[7]): r for r in self._conn.execute(
            f"SELECT {HIT_COLUMNS} FROM unnest(%s::text[], %s::text[], %s::int[], %s::text[]) "
            "AS q(source, key, idx, digest) JOIN documents d ON d.source = q.source "
            f"AND d.key = q.key JOIN chunks c ON {CURRENT} AND c.idx = q.idx "
            f"AND c.digest = q.digest JOIN chunk_texts t ON t.digest = c.digest WHERE {INDEXED}",
            ([r[0] for r in refs], [r[1] for r in refs], [r[2] for r in refs],
             [r[3] for r in refs]))}
        return [as_hit(rows[ref], score=score) for ref, score in zip(refs, scores, strict=True)
                if ref in rows]

    def indexed_chunks(self, source: str | None = None, key: str | None = None,
                       filters: Filters | None = None) -> Iterator[ChunkRef]:
        sql = (f"SELECT d.source, d.key, c.idx, c.digest, c.heading, c.start, c.\"end\" "
               f"FROM documents d JOIN chunks c ON {CURRENT} WHERE {INDEXED}")
        args: list[str] = []
        for column, value in (("source", source), ("key", key)):
            if value is not None:
                sql += f" AND d.{column} = %s"
                args.append(value)
        if filters:
            where, more = postgres_condition(filters)
            sql += f" AND {where}"
            args += more
        for row in self._conn.execute(sql + " ORDER BY d.source, d.key, c.idx",
                                      args).fetchall():
            yield ChunkRef(*row)

    def vectors(self, embedder: str,
                digests: Collection[str]) -> dict[str, npt.NDArray[np.float32]]:
        items = list(digests)
        found: dict[str, npt.NDArray[np.float32]] = {}
        for i in range(0, len(items), 5000):
            for dig, vector in self._conn.execute(
                "SELECT digest, vector FROM embeddings WHERE embedder = %s AND digest = ANY(%s)",
                (embedder, items[i : i + 5000])):
                found[dig] = np.asarray(vector.to_numpy(), dtype=np.float32)
        return found

    def window(self, hit: Hit, budget: int) -> Window:
        rows = self._conn.execute(
            "SELECT c.idx, c.start, c.\"end\", c.tokens, c.section FROM documents d "
            f"JOIN chunks c ON {CURRENT} WHERE d.source = %s AND d.key = %s ORDER BY c.idx",
            (hit.source, hit.key),
        ).fetchall()
        span = window_span(rows, hit.index, budget)
        if span is None:
            return Window(hit.index, hit.index, hit.text, 0)
        first, last, tokens = span
        start, end = rows[first][1], rows[last][2]
        text = self._conn.execute(
            "SELECT substr(t.text, %s, %s) FROM documents d JOIN texts t ON t.doc_id = d.id "
            "WHERE d.source = %s AND d.key = %s",
            (start + 1, end - start, hit.source, hit.key)).fetchone()
        return Window(first, last, str(text[0]) if text else hit.text, tokens)

    def embedder_dimensions(self) -> dict[str, int]:
        return {r[0][len(DIMENSION_PREFIX):]: int(r[1]) for r in self._conn.execute(
            "SELECT name, value FROM meta WHERE starts_with(name, %s)", (DIMENSION_PREFIX,))}

    # -- documents and status --------------------------------------------------------

    def text_pieces(self, source: str, key: str) -> Iterator[str]:
        row = self._conn.execute(
            "SELECT t.text FROM documents d JOIN texts t ON t.doc_id = d.id "
            "WHERE d.source = %s AND d.key = %s", (source, key)).fetchone()
        if row is not None:
            yield row[0]

    def document(self, key: str, source: str | None = None, *,
                 previous: bool = True) -> DocumentText | None:
        before = "t.previous" if previous else "NULL"
        sql = (f"SELECT d.source, d.key, d.title, t.text, {before}, d.generation, d.last_changed, "
               "m.moved_from, m.moved FROM documents d JOIN texts t ON t.doc_id = d.id "
               "LEFT JOIN moves m ON m.doc_id = d.id WHERE d.key = %s")
        args: tuple[str, ...] = (key,)
        if source is not None:
            sql += " AND d.source = %s"
            args = (key, source)
        row = self._conn.execute(sql + " ORDER BY d.id LIMIT 1", args).fetchone()
        return None if row is None else DocumentText(*row)

    def status(self) -> StoreStatus:
        db = self._conn
        by_source = {r[0]: int(r[1]) for r in db.execute(
            "SELECT source, count(*) FROM documents GROUP BY source")}
        last = db.execute("SELECT report FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return StoreStatus(
            documents=sum(by_source.values()),
            chunks=int(_scalar(db,
                f"SELECT count(*) FROM chunks c JOIN documents d ON {CURRENT}")),
            embeddings=int(_scalar(db, "SELECT count(*) FROM embeddings")),
            runs=int(_scalar(db, "SELECT count(*) FROM runs")),
            by_source=by_source,
            last_run=json.loads(last[0]) if last else None,
        )

    # -- maintenance -----------------------------------------------------------------

    def verify(self, embedder: str, identity: Callable[[str], str] | None,
               derivations: Collection[str] | None = None) -> list[str]:
        return self.damage() + invariants.problems(
            self._conn.execute, embedder, identity, mark="%s", derivations=derivations,
            bad_vectors="SELECT count(*) FROM embeddings WHERE vector_dims(vector) != dimension")

    def add_erasure(self, pattern: str, created: str) -> None:
        with self._transaction():
            crashpoint("store.add_erasure")
            self._write("INSERT INTO erasures (pattern, created) VALUES (%s, %s) "
                        "ON CONFLICT (pattern) DO NOTHING", (pattern, created))

    def erasures(self) -> list[tuple[str, str]]:
        return [(str(r[0]), str(r[1])) for r in self._conn.execute(
            "SELECT pattern, created FROM erasures ORDER BY pattern COLLATE \"C\"")]

    def remove_erasure(self, pattern: str) -> bool:
        with self._transaction():
            crashpoint("store.remove_erasure")
            return self._write("DELETE FROM erasures WHERE pattern = %s", (pattern,)) > 0

    def damage(self) -> list[str]:
        """What ``amcheck``'s ``bt_index_check`` finds wrong with kbsync's b-tree indexes.

        Where the extension cannot be created (no rights, not installed), that check
        is left out. Either way the unique indexes' promise is checked from the
        tables' side too: no key occurs twice when the rows are read without an index.
        """
        driver, _ = _psycopg()
        found = self._heap_duplicates()
        try:
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        except driver.Error:
            return found
        for (index,) in self._conn.execute(
                "SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = "
                "i.indexrelid JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'btree' AND "
                "c.relnamespace = current_schema()::regnamespace AND c.relpersistence != 't' "
                "ORDER BY 1").fetchall():
            try:
                self._conn.execute("SELECT bt_index_check(%s::regclass)", (index,))
            except driver.Error as exc:
                found.append(f"{_shown(self.url)}: index {index} is damaged "
                             f"({' '.join(str(exc).split())}); run REINDEX INDEX {index}, "
                             "then `kbsync verify`")
        return found

    def _heap_duplicates(self) -> list[str]:
        """Keys of the unique indexes that occur twice among the rows themselves."""
        found = []
        with self._transaction():
            for setting in ("enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan"):
                self._conn.execute(f"SET LOCAL {setting} = off")  # read the rows, not an index
            for table, key in (("documents", "source, key"), ("chunks", "doc_id, generation, idx"),
                               ("chunk_texts", "digest"), ("embeddings", "digest, embedder"),
                               ("texts", "doc_id")):
                twice = int(_scalar(self._conn, f"SELECT count(*) FROM (SELECT 1 FROM {table} "
                                                f"GROUP BY {key} HAVING count(*) > 1) d"))
                if twice:
                    found.append(f"{_shown(self.url)}: {twice} keys occur twice in {table}, so "
                                 f"its unique index is damaged; run REINDEX TABLE {table}, "
                                 "remove the duplicates, then `kbsync verify`")
        return found

    def erase(self, pattern: str) -> list[tuple[str, str]]:
        gone = erased(self._conn.execute("SELECT source, key FROM documents ORDER BY id"),
                      pattern)
        for source, key in gone:
            with self._transaction():
                self._delete(source, key)
                self._scrub_runs(key)
        # Even when nothing matched: a rerun of an erase killed after its documents'
        # transactions finishes the scrub (their texts and vectors, their dead rows).
        self.gc()
        # Rewrite the tables that held the erased text, so no dead row keeps a copy of it.
        for table in ("documents", "texts", "chunks", "chunk_texts", "runs", "work", "outbox"):
            crashpoint("store.vacuum")
            self._conn.execute(f"VACUUM FULL {table}")
        return gone

    def _scrub_runs(self, key: str) -> None:
        """Erasure covers run reports too: the erased key is replaced wherever it appears."""
        quoted = json.dumps(key)
        crashpoint("store.scrub_run")
        self._write("UPDATE runs SET report = replace(report, %s, '\"[erased]\"') "
                    "WHERE strpos(report, %s) > 0", (quoted, quoted))
        self._write("DELETE FROM work WHERE key = %s", (key,))

    def gc(self) -> dict[str, int]:
        with self._transaction():
            texts = self._write(
                "DELETE FROM chunk_texts t WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks c WHERE c.digest = t.digest)")
            crashpoint("store.gc_vectors")
            vectors = self._write(
                "DELETE FROM embeddings e WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks c WHERE c.digest = e.digest)")
            self._write("DELETE FROM meta m WHERE starts_with(m.name, %s) AND NOT EXISTS "
                        "(SELECT 1 FROM embeddings e WHERE e.embedder = substr(m.name, %s))",
                        (DIMENSION_PREFIX, len(DIMENSION_PREFIX) + 1))
            self._write("DELETE FROM work")
        for table in ("documents", "chunks", "chunk_texts", "texts", "embeddings", "runs"):
            crashpoint("store.vacuum")
            self._conn.execute(f"VACUUM (ANALYZE) {table}")
        return {"chunk_texts": texts, "embeddings": vectors}

    # -- the work queue of parallel workers -------------------------------------------

    def enqueue(self, run: str, source: str, items: Iterable[tuple[str, Mapping[str, Any]]],
                state: str = "todo") -> int:
        """Add documents of a run to the queue (``vanished`` ones wait for a move or deletion)."""
        rows = [(run, source, key, state, json.dumps(item)) for key, item in items]
        with self._conn.cursor() as cur:
            for i in range(0, len(rows), 5000):
                crashpoint("queue.enqueue")
                cur.executemany("INSERT INTO work (run, source, key, state, item) "
                                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                                rows[i : i + 5000])
        return len(rows)

    def abandon_runs(self) -> int:
        """Forget the queue of every run: those of coordinators that died before the end.

        Only the holder of the writer lock calls it, at the start of its run, so no
        other run is in progress; a worker still busy with a dead run's document
        finishes that one first (the delete waits for its row lock), then finds none.
        """
        crashpoint("queue.abandon_runs")
        return self._write("DELETE FROM work")

    def open_runs(self) -> list[str]:
        """Runs that still have documents to process, oldest first."""
        return [r[0] for r in self._conn.execute(
            "SELECT run FROM work WHERE state = 'todo' GROUP BY run ORDER BY run")]

    def pending(self, run: str) -> int:
        """Documents of ``run`` not yet done (a claimed one counts until its worker commits)."""
        return int(_scalar(self._conn,
            "SELECT count(*) FROM work WHERE run = %s AND state = 'todo'", (run,)))

    @contextmanager
    def claim(self, run: str) -> Iterator[Claim | None]:
        """Lock one waiting document of ``run`` for this worker, in a transaction.

        Everything the worker writes inside the block commits with the claim, or
        not at all: a worker that dies releases its row when the server ends
        its transaction. ``None`` when nothing is left that no one holds.
        """
        # Pipelined: statements whose results nobody reads (the settings, the writes, the
        # "done" mark, the commit) go to the server with the next one that is read.
        with self._conn.pipeline(), self._transaction():
            # A document's records and its "done" mark commit together, so a commit lost in a
            # server crash loses both and the document is simply processed again: no need
            # to wait for the disk at every document.
            self._conn.execute("SET LOCAL synchronous_commit = off")
            crashpoint("queue.claim")
            row = self._conn.execute(
                "SELECT source, key, item FROM work WHERE run = %s AND state = 'todo' "
                "ORDER BY source, key LIMIT 1 FOR UPDATE SKIP LOCKED", (run,)).fetchone()
            yield None if row is None else Claim(run, row[0], row[1], row[2])

    def finish(self, claim: Claim, result: Mapping[str, Any]) -> None:
        """Mark a claimed document done with its result (inside the claim's transaction)."""
        crashpoint("queue.finish")
        self._conn.execute(
            "UPDATE work SET state = 'done', result = %s WHERE run = %s AND source = %s "
            "AND key = %s", (json.dumps(result), claim.run, claim.source, claim.key))

    def claim_vanished(self, run: str, source: str, text_hash: str,
                       derivation: str) -> StoredDocument | None:
        """A vanished document of this run with the same text, taken as the origin of a move."""
        row = self._conn.execute(
            "SELECT w.key FROM work w JOIN documents d ON d.source = w.source AND d.key = w.key "
            "WHERE w.run = %s AND w.source = %s AND w.state = 'vanished' AND d.text_hash = %s "
            "AND d.derivation = %s ORDER BY w.key LIMIT 1 FOR UPDATE OF w SKIP LOCKED",
            (run, source, text_hash, derivation)).fetchone()
        if row is None:
            return None
        crashpoint("queue.claim_vanished")
        self._conn.execute("UPDATE work SET state = 'moved' WHERE run = %s AND source = %s "
                           "AND key = %s", (run, source, row[0]))
        return self.stored(source, row[0])

    def claim_vanished_at(self, run: str, source: str, key: str) -> StoredDocument | None:
        """The vanished document of this run at ``key`` (the origin a source named for a
        rename), taken as the origin of a move; None if it did not vanish or is taken."""
        crashpoint("queue.claim_vanished")
        row = self._conn.execute(
            "UPDATE work SET state = 'moved' WHERE run = %s AND source = %s AND key = %s "
            "AND state = 'vanished' RETURNING key", (run, source, key)).fetchone()
        return None if row is None else self.stored(source, row[0])

    def vanished(self, run: str, source: str) -> list[str]:
        """Documents of this run that vanished and were not the origin of a move."""
        return [r[0] for r in self._conn.execute(
            "SELECT key FROM work WHERE run = %s AND source = %s AND state = 'vanished' "
            "ORDER BY key", (run, source))]

    def results(self, run: str, source: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The results of the processed documents of one source of a run, streamed."""
        with self._transaction(), self._conn.cursor(name="kbsync_results") as cur:
            cur.itersize = 2000
            cur.execute("SELECT key, result FROM work WHERE run = %s AND source = %s AND "
                        "state = 'done' ORDER BY key", (run, source))
            yield from ((r[0], r[1]) for r in cur)

    def end_run(self, run: str) -> None:
        """Forget the queue of a finished run."""
        crashpoint("queue.end_run")
        self._conn.execute("DELETE FROM work WHERE run = %s", (run,))


@guarded(lambda lock: _shown(lock.url), _driver_error)
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
        conn = _connect(self.url, self._password, self.schema)
        told = False
        while not _scalar(conn, "SELECT pg_try_advisory_lock(hashtext(%s))", (self._key,)):
            holder = _holder(conn, self._key)
            who = f" ({holder})" if holder else ""
            if not self.wait:
                conn.close()
                raise LockedError(f"another kbsync process{who} is writing to this knowledge "
                                  f"base ({_shown(self.url)})")
            if not told and self.on_wait is not None:
                self.on_wait(f"waiting for another kbsync process{who} to finish…")
                told = True
            time.sleep(self.poll)
        self._conn = conn
        crashpoint("lock.acquired")

    def holder(self) -> str | None:
        """The server process of the writer that holds the lock now, or None when it is free."""
        with _connect(self.url, self._password, self.schema) as conn:
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


def _scalar(conn: psycopg.Connection[Any], sql: str, args: Sequence[Any] = ()) -> Any:
    """The first column of the first row of a query that always returns one."""
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row[0]


def _holder(conn: psycopg.Connection[Any], key: str) -> str | None:
    """The server process that holds the advisory lock ``key``, as words, or None."""
    row = conn.execute("SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' "
                       "AND l.objid = hashtext(%s)::oid AND l.granted LIMIT 1", (key,)).fetchone()
    return None if row is None else f"server process {row[0]}"
