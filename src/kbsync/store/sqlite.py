"""The embedded record store: one SQLite file in WAL mode, vectors inside it.

Records and vectors of a document commit in one transaction, so a crash never
leaves a chunk without its vector or a vector without its chunk. The schema
version lives in ``PRAGMA user_version``; a newer one than this code knows is
refused before anything is written.

A store that cannot be written (a read-only mount, an immutable file or
folder) is opened read-only: it can be searched and inspected, and a write
fails with one line that says so. Every driver error of a public method
reaches the caller as a one-line :class:`StoreError` (see :mod:`kbsync.store.guard`).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import sqlite3
import stat
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kbsync.crashpoints import crashpoint
from kbsync.errors import SchemaError, StoreError
from kbsync.identity import embedding_text_key
from kbsync.model import PageSchedule
from kbsync.plan import Action, ChunkDraft, DocumentPlan, StoredDocument
from kbsync.store import ChunkRef, DocumentText, Hit, RunRecord, StoreStatus, Window, invariants
from kbsync.store.filters import Filters, sqlite_condition
from kbsync.store.guard import READ_ONLY, REPAIR, guarded, sqlite_or_os_error, store_error
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

__all__ = ["SCHEMA_VERSION", "SqliteStore", "carry_erasures", "salvage_embeddings", "swap_in"]

# What the full-text heading column holds for a chunk ``c`` of a document ``d``: the
# document's title and the chunk's section heading (bm25 weighs it above the body).
_FTS_HEADING = "trim(coalesce(d.title, '') || ' ' || coalesce(c.heading, ''))"


def fts_heading(title: str | None, heading: str | None) -> str:
    """The heading column of a chunk's full-text row, as :data:`_FTS_HEADING` makes it."""
    return f"{title or ''} {heading or ''}".strip(" ")  # SQL's trim() takes spaces only

# Meta entries "dimension <embedder>": the dimension of the embedder's vectors, written
# with them (a GROUP BY over every vector took 71 ms of a 10,000-file no-op sync); gc drops
# the entries of embedders it leaves without a vector. A range, so the primary key answers
# it ("!" follows the prefix's closing space).
_DIMENSIONS = f"name >= '{DIMENSION_PREFIX}' AND name < '{DIMENSION_PREFIX[:-1]}!'"
_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        locator TEXT NOT NULL,
        media_type TEXT NOT NULL,
        size INTEGER, mtime_ns INTEGER, inode INTEGER,
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
        UNIQUE (source, key)
    );
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
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
    CREATE TABLE chunk_texts (digest TEXT PRIMARY KEY, text TEXT NOT NULL);
    CREATE TABLE texts (
        doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
        text TEXT NOT NULL,
        previous TEXT
    );
    CREATE TABLE embeddings (
        digest TEXT NOT NULL,
        embedder TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (digest, embedder)
    );
    CREATE VIRTUAL TABLE chunk_fts USING fts5 (text, tokenize = 'unicode61');
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        started TEXT NOT NULL,
        finished TEXT NOT NULL,
        report TEXT NOT NULL
    );
    """,
    # 2: consecutive checks that found a document missing (an HTTP 404 waits for confirmation).
    """
    ALTER TABLE documents ADD COLUMN missing INTEGER NOT NULL DEFAULT 0;
    """,
    # 3: chunk digests shared by too many documents of a source, left out of the index.
    """
    CREATE TABLE boilerplate (
        source TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (source, digest)
    );
    """,
    # 4: the outbox: ids of external vectors to delete, committed with the records.
    """
    CREATE TABLE outbox (id INTEGER PRIMARY KEY, vector_id TEXT NOT NULL UNIQUE);
    """,
    # 5: the frontier: keys a source found but could not take yet, tried again next time.
    """
    CREATE TABLE frontier (
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        PRIMARY KEY (source, key)
    );
    """,
    # 6: erasures (tombstones): key patterns `kbsync erase` removed, which no sync brings back.
    """
    CREATE TABLE erasures (pattern TEXT PRIMARY KEY, created TEXT NOT NULL);
    """,
    # 7: full text with stemming ("retries" finds "retry") and the chunk's heading as a
    # column of its own, weighted above the body (see _FTS_WEIGHTS).
    """
    DROP TABLE chunk_fts;
    CREATE VIRTUAL TABLE chunk_fts USING fts5 (text, heading, tokenize = 'porter unicode61');
    INSERT INTO chunk_fts (rowid, text, heading) SELECT c.id, t.text, coalesce(c.heading, '')
        FROM documents d JOIN chunks c ON c.doc_id = d.id AND c.generation = d.generation
        JOIN chunk_texts t ON t.digest = c.digest;
    """,
    # 8: each kept version's text a row of its own, keyed by generation: an edit inserts
    # the new text beside the old one, where rewriting one row holding both made SQLite
    # build a record of the two texts of a big document at once.
    """
    CREATE TABLE versions (
        doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        generation INTEGER NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (doc_id, generation)
    );
    INSERT INTO versions (doc_id, generation, text)
        SELECT t.doc_id, d.generation, t.text FROM texts t JOIN documents d ON d.id = t.doc_id;
    INSERT INTO versions (doc_id, generation, text)
        SELECT t.doc_id, d.generation - 1, t.previous FROM texts t
        JOIN documents d ON d.id = t.doc_id WHERE t.previous IS NOT NULL;
    DROP TABLE texts;
    """,
    # 9: the document's title joins the chunk's heading in the heading column, so every
    # chunk of a page titled "Retries and Backoff" matches "retries" there.
    f"""
    DROP TABLE chunk_fts;
    CREATE VIRTUAL TABLE chunk_fts USING fts5 (text, heading, tokenize = 'porter unicode61');
    INSERT INTO chunk_fts (rowid, text, heading) SELECT c.id, t.text, {_FTS_HEADING}
        FROM documents d JOIN chunks c ON c.doc_id = d.id AND c.generation = d.generation
        JOIN chunk_texts t ON t.digest = c.digest;
    """,
    # 10: revisit schedules of web pages (kbsync.schedule): when each page was last
    # checked and seen changed, its interval, and the hash and type of its last body.
    # (IF NOT EXISTS: a store rewound to an older version, as tests do, keeps its table.)
    """
    CREATE TABLE IF NOT EXISTS schedules (
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        checked REAL NOT NULL,
        changed REAL NOT NULL,
        interval_seconds REAL NOT NULL,
        digest TEXT NOT NULL,
        media_type TEXT NOT NULL,
        PRIMARY KEY (source, key)
    );
    """,
    # 11: the key each document had before its last move, and when it moved.
    """
    CREATE TABLE IF NOT EXISTS moves (
        doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
        moved_from TEXT NOT NULL,
        moved TEXT NOT NULL
    );
    """,
    # 12: each chunk text's embedding key (kbsync.identity.embedding_text_key), so a chunk
    # whose identity changed but whose text did not finds its vector by the text. (The
    # table is copied, not altered: a store rewound to an older version has the column.)
    """
    CREATE TABLE chunk_texts_keyed (digest TEXT PRIMARY KEY, text TEXT NOT NULL, text_key BLOB);
    INSERT INTO chunk_texts_keyed SELECT digest, text, kbsync_text_key(text) FROM chunk_texts;
    DROP TABLE chunk_texts;
    ALTER TABLE chunk_texts_keyed RENAME TO chunk_texts;
    CREATE INDEX chunk_texts_key ON chunk_texts (text_key);
    """,
    # 13: the dimension of each embedder's vectors kept in meta (see _DIMENSIONS), where every
    # sync grouped all the vectors to find it.
    f"""
    INSERT OR IGNORE INTO meta (name, value)
        SELECT '{DIMENSION_PREFIX}' || embedder, CAST(max(dimension) AS TEXT) FROM embeddings
        GROUP BY embedder;
    """,
)
# bm25 weights of the full-text columns (text, heading): a word of the section's
# heading says more about what a chunk is about than the same word in its body.
_FTS_WEIGHTS = "1.0, 2.0"
# The full-text table as the latest migration makes it (repair makes it anew the same way).
_FTS_TABLE = ("CREATE VIRTUAL TABLE chunk_fts USING fts5 "
              "(text, heading, tokenize = 'porter unicode61')")
SCHEMA_VERSION = len(_MIGRATIONS)
# The ids of current chunks ``c`` of documents ``d``, to be restricted by a filter on ``d``:
# CROSS JOIN keeps documents the outer loop, so the filter runs once per document, not
# once per chunk (the planner otherwise scans chunks first).
_MATCHING_CHUNKS = f"SELECT c.id FROM documents d CROSS JOIN chunks c ON {CURRENT}"
# Joins a document ``d`` to the text ``t`` of its current version.
CURRENT_TEXT = "t.doc_id = d.id AND t.generation = d.generation"
# The page size of a new store's file, and the write-ahead log's size at which a commit
# checkpoints it into the file (see SqliteStore._configure).
_PAGE_SIZE = 16384
_WAL_BYTES = 32 * 2**20


@guarded(lambda store: str(store.path), sqlite_or_os_error)
class SqliteStore:
    """A :class:`~kbsync.store.RecordStore` in one SQLite file.

    ``read_only`` opens it for reading only; a store whose file or folder cannot
    be written is opened so anyway (see :attr:`read_only`).
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        memory = str(path) == ":memory:"
        #: Whether the store is open for reading only (writes fail with a StoreError).
        self.read_only = read_only or (not memory and self.path.exists()
                                       and not _writable(self.path))
        if not memory and not self.read_only:
            _prepare_state(self.path)
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
        self._vector_orders: dict[str, tuple[list[int], npt.NDArray[np.intp]]] = {}
        self._data_version = -1

    # -- lifecycle -------------------------------------------------------------------

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
                db = sqlite3.connect(target, isolation_level=None, timeout=30.0,
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
            pragmas = (f"page_size = {_PAGE_SIZE}", *pragmas, "journal_mode = WAL",
                       "synchronous = NORMAL", "secure_delete = ON")
        for pragma in pragmas:
            self._db.execute(f"PRAGMA {pragma}")
        if not self.read_only:
            # A checkpoint copies the write-ahead log into the file and syncs it, and a
            # page that changes again before it is copied once: SQLite's default, every
            # 1000 pages, made a first sync copy its B-tree pages over and over.
            page = self._db.execute("PRAGMA page_size").fetchone()[0]
            self._db.execute(f"PRAGMA wal_autocheckpoint = {max(1000, _WAL_BYTES // page)}")

    def _migrate(self, version: int) -> None:
        with self._transaction():
            # Another process may have migrated while we waited for the write lock.
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            for step in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
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
            self._db.execute("BEGIN IMMEDIATE")
            yield self._db
            crashpoint("store.commit")
            self._db.execute("COMMIT")
            crashpoint("store.committed")
        except BaseException as exc:
            if self._db.in_transaction:  # SQLite may have rolled back already (SQLITE_FULL)
                self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error | OSError):
                raise store_error(str(self.path), exc, "cannot write the store") from exc
            raise

    def close(self) -> None:
        self._db.close()

    @property
    def total_changes(self) -> int:
        """Rows changed through this connection (tests assert idempotency with it)."""
        return self._db.total_changes

    # -- meta ------------------------------------------------------------------------

    def get_meta(self, name: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, name: str, value: str) -> None:
        if value == "":
            if self.get_meta(name) is not None:
                with self._transaction() as db:
                    db.execute("DELETE FROM meta WHERE name = ?", (name,))
        elif self.get_meta(name) != value:
            with self._transaction() as db:
                db.execute(
                    "INSERT INTO meta (name, value) VALUES (?, ?) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (name, value),
                )

    # -- reading ---------------------------------------------------------------------

    def manifest(self, source: str, after: str | None = None,
                 limit: int | None = None) -> dict[str, StoredDocument]:
        rows = self._db.execute(
            f"SELECT {MANIFEST_COLUMNS} FROM documents WHERE source = ? AND key > ? "
            "ORDER BY key LIMIT ?", (source, "" if after is None else after, limit or -1))
        return {r[0]: stored_document(r) for r in rows}

    def with_digests(self, source: str, docs: Collection[StoredDocument]) -> list[StoredDocument]:
        out = []
        for doc in docs:
            rows = self._db.execute(
                f"SELECT c.digest FROM documents d JOIN chunks c ON {CURRENT} "
                "WHERE d.source = ? AND d.key = ? ORDER BY c.idx",
                (source, doc.key),
            ).fetchall()
            out.append(replace(doc, chunk_digests=tuple(r[0] for r in rows)))
        return out

    def cached(self, embedder: str, digests: Collection[str]) -> set[str]:
        found: set[str] = set()
        items = list(digests)
        for i in range(0, len(items), 500):
            batch = items[i : i + 500]
            marks = ",".join("?" * len(batch))
            found.update(r[0] for r in self._db.execute(
                f"SELECT digest FROM embeddings WHERE embedder = ? AND digest IN ({marks})",
                (embedder, *batch),
            ))
        return found

    # -- writing ---------------------------------------------------------------------

    def apply(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              outbox: Collection[str] = ()) -> None:
        if not doc.writes:
            return
        self._vectors.clear()
        with self._transaction() as db:
            self._insert_vectors(db, embedder, vectors)
            crashpoint("store.write_outbox")
            db.executemany("INSERT OR IGNORE INTO outbox (vector_id) VALUES (?)",
                           ((i,) for i in outbox))
            crashpoint("store.apply")
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

    def pending_outbox(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT vector_id FROM outbox ORDER BY id")]

    def clear_outbox(self, ids: Collection[str]) -> None:
        if ids:
            with self._transaction() as db:
                db.executemany("DELETE FROM outbox WHERE vector_id = ?", ((i,) for i in ids))

    def _doc_id(self, source: str, key: str) -> tuple[int, int] | None:
        row = self._db.execute(
            "SELECT id, generation FROM documents WHERE source = ? AND key = ?", (source, key)
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def _drop_fts(self, doc_id: int, generation: int) -> None:
        crashpoint("store.drop_fts")
        self._db.execute(
            "DELETE FROM chunk_fts WHERE rowid IN "
            "(SELECT id FROM chunks WHERE doc_id = ? AND generation = ?)",
            (doc_id, generation),
        )

    def _delete(self, source: str, key: str) -> None:
        found = self._doc_id(source, key)
        if found is None:
            return
        self._drop_fts(*found)
        crashpoint("store.delete_document")
        self._db.execute("DELETE FROM documents WHERE id = ?", (found[0],))
        # A replacement held for it would name a document that is gone.
        self._db.execute("DELETE FROM meta WHERE name = ?", (held_meta_name(source, key),))
        self._db.execute("DELETE FROM schedules WHERE source = ? AND key = ?", (source, key))

    def _move(self, source: str, doc: DocumentPlan, now: str) -> None:
        version = doc.version
        assert version is not None
        assert doc.previous_key is not None
        found = self._doc_id(source, doc.previous_key)
        if found is None:  # the old row is gone: treat as new
            self._write_version(source, doc, now)
            return
        crashpoint("store.move_document")
        self._db.execute("INSERT OR REPLACE INTO moves (doc_id, moved_from, moved) "
                         "VALUES (?, ?, ?)", (found[0], doc.previous_key, now))
        if doc.edited:  # the record takes its new key, then its new version
            self._db.execute("UPDATE documents SET key = ? WHERE id = ?", (doc.key, found[0]))
            self._write_version(source, doc, now)
            return
        # The same text: last_changed stays that of the text.
        self._db.execute(
            "UPDATE documents SET key = ?, locator = ?, media_type = ?, size = ?, mtime_ns = ?, "
            "inode = ?, etag = ?, last_modified = ?, bytes_hash = ?, title = ?, metadata = ?, "
            "missing = 0, last_seen = ? WHERE id = ?",
            (doc.key, version.locator, version.media_type, *stat_row(version.stat),
             *validator_row(version.validators), version.bytes_hash, version.title,
             version.metadata, now, found[0]),
        )
        self._retitle(found[0])

    def _refresh(self, source: str, doc: DocumentPlan, now: str) -> None:
        found = self._doc_id(source, doc.key)
        if found is None:
            return
        version = doc.version
        crashpoint("store.refresh_document")
        if version is None:  # gate 2 or a 304: same content, new stat or validators
            self._db.execute(
                "UPDATE documents SET size = ?, mtime_ns = ?, inode = ?, etag = ?, "
                "last_modified = ?, missing = 0 WHERE id = ?",
                (*stat_row(doc.stat), *validator_row(doc.validators), found[0]),
            )
            return
        self._db.execute(
            "UPDATE documents SET locator = ?, media_type = ?, size = ?, mtime_ns = ?, inode = ?, "
            "etag = ?, last_modified = ?, bytes_hash = ?, title = ?, metadata = ?, missing = 0, "
            "last_seen = ? WHERE id = ?",
            (version.locator, version.media_type, *stat_row(version.stat),
             *validator_row(version.validators), version.bytes_hash, version.title,
             version.metadata, now, found[0]),
        )
        self._retitle(found[0])

    def _retitle(self, doc_id: int) -> None:
        """Give the full-text rows of a document's current chunks its (maybe new) title."""
        self._db.execute(
            f"UPDATE chunk_fts SET heading = (SELECT {_FTS_HEADING} FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id WHERE c.id = chunk_fts.rowid) "
            "WHERE rowid IN (SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "AND c.generation = d.generation WHERE d.id = ?)",
            (doc_id,),
        )

    def _write_version(self, source: str, doc: DocumentPlan, now: str) -> None:
        version = doc.version
        assert version is not None
        db = self._db
        found = self._doc_id(source, doc.key)
        row = (version.locator, version.media_type, *stat_row(version.stat),
               *validator_row(version.validators), version.bytes_hash, version.text_hash,
               version.derivation, version.title, version.metadata)
        crashpoint("store.write_document")
        if found is None:
            generation = 1
            cursor = db.execute(
                "INSERT INTO documents (source, key, locator, media_type, size, mtime_ns, inode, "
                "etag, last_modified, bytes_hash, text_hash, derivation, title, metadata, "
                "generation, first_seen, last_seen, last_changed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (source, doc.key, *row, generation, now, now, now),
            )
            doc_id = int(cursor.lastrowid or 0)
            crashpoint("store.write_text")
            _write_text(db, doc_id, generation, version.text)
        else:
            doc_id, old_generation = found
            generation = old_generation + 1
            self._drop_fts(doc_id, old_generation)
            db.execute(
                "UPDATE documents SET locator = ?, media_type = ?, size = ?, mtime_ns = ?, "
                "inode = ?, etag = ?, last_modified = ?, bytes_hash = ?, text_hash = ?, "
                "derivation = ?, title = ?, metadata = ?, generation = ?, missing = 0, "
                "last_seen = ?, last_changed = ? WHERE id = ?",
                (*row, generation, now, now, doc_id),
            )
            crashpoint("store.drop_old_chunks")
            db.execute("DELETE FROM chunks WHERE doc_id = ? AND generation < ?",
                       (doc_id, generation - 1))
            db.execute("DELETE FROM versions WHERE doc_id = ? AND generation < ?",
                       (doc_id, generation - 1))
            crashpoint("store.write_text")
            _write_text(db, doc_id, generation, version.text)
        self._write_chunks(doc_id, generation, version.chunks, version.title)

    def _rechunk(self, source: str, doc: DocumentPlan, now: str) -> None:
        """The same text in new chunks: the current generation's chunks are replaced, so
        its text, its previous text and when it last changed stay as they were."""
        version = doc.version
        assert version is not None
        found = self._doc_id(source, doc.key)
        if found is None:
            self._write_version(source, doc, now)
            return
        doc_id, generation = found
        self._drop_fts(doc_id, generation)
        crashpoint("store.write_document")
        self._db.execute(
            "UPDATE documents SET locator = ?, media_type = ?, size = ?, mtime_ns = ?, inode = ?, "
            "etag = ?, last_modified = ?, bytes_hash = ?, derivation = ?, title = ?, "
            "metadata = ?, missing = 0, last_seen = ? WHERE id = ?",
            (version.locator, version.media_type, *stat_row(version.stat),
             *validator_row(version.validators), version.bytes_hash, version.derivation,
             version.title, version.metadata, now, doc_id),
        )
        crashpoint("store.drop_old_chunks")
        self._db.execute("DELETE FROM chunks WHERE doc_id = ? AND generation = ?",
                         (doc_id, generation))
        self._write_chunks(doc_id, generation, version.chunks, version.title)

    def _write_chunks(self, doc_id: int, generation: int, chunks: Sequence[ChunkDraft],
                      title: str | None) -> None:
        """A generation's chunks, their texts and their full-text rows (``title`` is the
        document's, which its full-text rows weigh with each chunk's heading)."""
        db = self._db
        crashpoint("store.write_chunk_texts")
        db.executemany(
            "INSERT OR IGNORE INTO chunk_texts (digest, text, text_key) VALUES (?, ?, ?)",
            ((c.digest, c.text, embedding_text_key(c.text)) for c in chunks),
        )
        crashpoint("store.write_chunks")
        db.executemany(
            "INSERT INTO chunks (doc_id, generation, idx, digest, section, heading, start, "
            '"end", tokens, boundary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            ((doc_id, generation, index, c.digest, c.section, c.heading, c.start, c.end,
              c.tokens, c.boundary) for index, c in enumerate(chunks)),
        )
        crashpoint("store.write_fts")
        # The full-text rows from the texts in hand: selected from a join with chunk_texts
        # and documents, they made a third of a first sync's apply step.
        ids = [row[0] for row in db.execute(
            "SELECT id FROM chunks WHERE doc_id = ? AND generation = ? ORDER BY idx",
            (doc_id, generation))]
        db.executemany(
            "INSERT INTO chunk_fts (rowid, text, heading) VALUES (?, ?, ?)",
            ((row, c.text, fts_heading(title, c.heading))
             for row, c in zip(ids, chunks, strict=True)),
        )

    def chunk_digests(self, source: str) -> Iterator[tuple[str, str]]:
        yield from self._db.execute(
            f"SELECT d.key, c.digest FROM documents d JOIN chunks c ON {CURRENT} "
            "WHERE d.source = ?",
            (source,),
        )

    def boilerplate(self, source: str) -> frozenset[str]:
        return frozenset(r[0] for r in self._db.execute(
            "SELECT digest FROM boilerplate WHERE source = ?", (source,)))

    def set_boilerplate(self, source: str, digests: Collection[str]) -> None:
        if self.boilerplate(source) == frozenset(digests):
            return
        self._vectors.clear()
        with self._transaction() as db:
            db.execute("DELETE FROM boilerplate WHERE source = ?", (source,))
            crashpoint("store.write_boilerplate")
            db.executemany("INSERT INTO boilerplate (source, digest) VALUES (?, ?)",
                           ((source, d) for d in digests))

    def frontier(self, source: str) -> frozenset[str]:
        return frozenset(r[0] for r in self._db.execute(
            "SELECT key FROM frontier WHERE source = ?", (source,)))

    def set_frontier(self, source: str, keys: Collection[str]) -> None:
        if self.frontier(source) == frozenset(keys):
            return
        with self._transaction() as db:
            db.execute("DELETE FROM frontier WHERE source = ?", (source,))
            db.executemany("INSERT INTO frontier (source, key) VALUES (?, ?)",
                           ((source, k) for k in sorted(keys)))

    def schedules(self, source: str) -> dict[str, PageSchedule]:
        return {r[0]: PageSchedule(*r[1:]) for r in self._db.execute(
            "SELECT key, checked, changed, interval_seconds, digest, media_type FROM schedules "
            "WHERE source = ?", (source,))}

    def set_schedules(self, source: str, schedules: Mapping[str, PageSchedule],
                      replace: bool) -> None:
        with self._transaction() as db:
            if replace:
                db.execute("DELETE FROM schedules WHERE source = ?", (source,))
            db.executemany(
                "INSERT OR REPLACE INTO schedules "
                "(source, key, checked, changed, interval_seconds, digest, media_type) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                ((source, k, s.checked, s.changed, s.interval, s.digest, s.media_type)
                 for k, s in sorted(schedules.items())))

    def source_names(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT DISTINCT source FROM documents")}

    def unembedded(self, source: str, embedder: str) -> dict[str, str]:
        # Texts are looked up only for the missing digests: a no-op sync asks this of
        # every chunk, and almost none is missing.
        return dict(self._db.execute(
            "SELECT t.digest, t.text FROM chunk_texts t WHERE t.digest IN ("
            f"SELECT c.digest FROM documents d JOIN chunks c ON {CURRENT} "
            "WHERE d.source = ? AND NOT EXISTS (SELECT 1 FROM embeddings e "
            f"WHERE e.digest = c.digest AND e.embedder = ?) AND {INDEXED})",
            (source, embedder),
        ).fetchall())

    def adopt_by_text(self, embedder: str, text_keys: Mapping[str, bytes], *,
                      write: bool = True) -> set[str]:
        wanting = by_text_key(text_keys)
        keys = list(wanting)
        holders: dict[bytes, str] = {}  # a text's key -> a digest holding its vector
        for i in range(0, len(keys), 500):
            batch = keys[i : i + 500]
            holders.update(self._db.execute(
                "SELECT t.text_key, min(t.digest) FROM chunk_texts t JOIN embeddings e "
                "ON e.digest = t.digest AND e.embedder = ? "
                f"WHERE t.text_key IN ({','.join('?' * len(batch))}) GROUP BY t.text_key",
                (embedder, *batch)).fetchall())
        found = [(digest, holder) for key, holder in holders.items() for digest in wanting[key]]
        if write and found:
            self._vectors.clear()
            with self._transaction() as db:
                crashpoint("store.adopt_vectors")
                db.executemany(
                    "INSERT OR IGNORE INTO embeddings (digest, embedder, dimension, vector) "
                    "SELECT ?, embedder, dimension, vector FROM embeddings "
                    "WHERE digest = ? AND embedder = ?",
                    ((digest, holder, embedder) for digest, holder in found))
        return {digest for digest, _ in found}

    def put_vectors(self, embedder: str,
                    vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if not vectors:
            return
        self._vectors.clear()
        with self._transaction() as db:
            self._insert_vectors(db, embedder, vectors)

    def _insert_vectors(self, db: sqlite3.Connection, embedder: str,
                        vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if not vectors:
            return
        crashpoint("store.write_vectors")
        rows = [(digest, np.asarray(vector, dtype=np.float32)) for digest, vector in
                vectors.items()]
        db.executemany(
            "INSERT OR IGNORE INTO embeddings (digest, embedder, dimension, vector) "
            "VALUES (?, ?, ?, ?)",
            ((digest, embedder, int(v.shape[0]), v.tobytes()) for digest, v in rows),
        )
        db.executemany("INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)",
                       {(DIMENSION_PREFIX + embedder, str(v.shape[0])) for _, v in rows})

    def mark_missing(self, source: str, key: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE documents SET missing = missing + 1 WHERE source = ? AND key = ?",
                (source, key),
            )

    def record_run(self, started: str, finished: str, report: Mapping[str, Any]) -> int:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO runs (started, finished, report) VALUES (?, ?, ?)",
                (started, finished, json.dumps(report, sort_keys=True)),
            )
        return int(cursor.lastrowid or 0)

    def runs(self, limit: int = 50) -> list[RunRecord]:
        rows = self._db.execute(
            "SELECT id, started, finished, report FROM runs ORDER BY id DESC LIMIT ?",
            (max(limit, 0),),
        ).fetchall()
        return [run_record(r) for r in rows]

    def run(self, run_id: int) -> RunRecord | None:
        row = self._db.execute(
            "SELECT id, started, finished, report FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        return run_record(row) if row else None

    # -- search ----------------------------------------------------------------------

    _HIT = (f"SELECT {HIT_COLUMNS} FROM chunks c JOIN documents d ON {CURRENT} "
            "JOIN chunk_texts t ON t.digest = c.digest ")

    def search_text(self, query: str, k: int, filters: Filters | None = None) -> list[Hit]:
        terms = query_terms(query)
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        restrict, args = "", list[str]()
        if filters:
            # Only the matching documents' indexed chunks are ranked, so a filter that
            # matches few documents loses none of their hits to the best of the rest.
            # "+rowid": a plain rowid constraint is handed to FTS5, which then evaluates
            # the query once per allowed row (15x slower than filtering its matches).
            where, args = sqlite_condition(filters)
            restrict = f" AND +rowid IN ({_MATCHING_CHUNKS} WHERE {INDEXED} AND {where})"
        rows = self._db.execute(
            f"SELECT {HIT_COLUMNS}, f.rank FROM (SELECT rowid, bm25(chunk_fts, {_FTS_WEIGHTS}) "
            f"AS rank FROM chunk_fts WHERE chunk_fts MATCH ?{restrict} ORDER BY rank LIMIT ?) f "
            "JOIN chunks c ON c.id = f.rowid "
            f"JOIN documents d ON {CURRENT} JOIN chunk_texts t ON t.digest = c.digest "
            f"WHERE {INDEXED} ORDER BY f.rank",
            (match, *args, 4 * k + 10),  # room for boilerplate rows filtered out after ranking
        ).fetchall()[:k]
        # bm25() is lower-is-better and negative; report its negation as the score.
        return [as_hit(r, score=-float(r[10])) for r in rows]

    def _vector_matrix(self, embedder: str) -> tuple[npt.NDArray[np.float32], list[int]]:
        # data_version changes when another connection commits; our own writes clear the cache.
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._vectors.clear()
            self._data_version = version
        cached = self._vectors.get(embedder)
        if cached is not None:
            return cached
        rows = self._db.execute(
            f"SELECT c.id, e.vector FROM documents d JOIN chunks c ON {CURRENT} "
            f"JOIN embeddings e ON e.digest = c.digest AND e.embedder = ? WHERE {INDEXED}",
            (embedder,),
        ).fetchall()
        ids = [int(r[0]) for r in rows]
        if not rows:
            matrix = np.zeros((0, 0), dtype=np.float32)
        else:
            matrix = np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
        self._vectors[embedder] = (matrix, ids)
        return matrix, ids

    def _filtered_rows(self, embedder: str, filters: Filters) -> npt.NDArray[np.intp]:
        """Rows of the vector matrix that belong to documents meeting ``filters``."""
        ids = self._vector_matrix(embedder)[1]
        if not ids:
            return np.zeros(0, dtype=np.intp)
        where, args = sqlite_condition(filters)
        wanted = np.fromiter((r[0] for r in self._db.execute(
            f"{_MATCHING_CHUNKS} WHERE {where}", args)), dtype=np.int64)
        order = self._vector_order(embedder, ids)
        sorted_ids = np.asarray(ids, dtype=np.int64)[order]
        at = np.searchsorted(sorted_ids, wanted)
        found = at < len(sorted_ids)
        found[found] = sorted_ids[at[found]] == wanted[found]
        rows: npt.NDArray[np.intp] = np.sort(order[at[found]])
        return rows

    def _vector_order(self, embedder: str, ids: list[int]) -> npt.NDArray[np.intp]:
        # The sort of the matrix's chunk ids, kept beside it (the matrix is rebuilt, and
        # this forgotten, whenever the store changes).
        cached = self._vector_orders.get(embedder)
        if cached is None or cached[0] is not ids:
            cached = (ids, np.argsort(np.asarray(ids, dtype=np.int64), kind="stable"))
            self._vector_orders[embedder] = cached
        return cached[1]

    def search_vector(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                      filters: Filters | None = None) -> list[Hit]:
        matrix, ids = self._vector_matrix(embedder)
        if not ids:
            return []
        if filters:
            # Exact over the matching documents' vectors only: no top-k of all, then filtered.
            chosen = self._filtered_rows(embedder, filters)
            matrix, ids = matrix[chosen], [ids[i] for i in chosen.tolist()]
            if not ids:
                return []
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        if k < len(scores):  # select the best k in linear time, then order only those
            best = np.argpartition(-scores, k)[:k]
            top = best[np.argsort(-scores[best], kind="stable")]
        else:
            top = np.argsort(-scores, kind="stable")
        wanted = [ids[i] for i in top.tolist()]
        marks = ",".join("?" * len(wanted))
        rows = {r["id"]: r for r in self._db.execute(
            self._HIT.replace("SELECT ", "SELECT c.id AS id, ", 1) + f"WHERE c.id IN ({marks})",
            wanted)}
        return [as_hit(tuple(rows[ids[i]])[1:], score=float(scores[i]))
                for i in top.tolist() if ids[i] in rows]

    def hits_at(self, refs: Sequence[tuple[str, str, int, str]],
                scores: Sequence[float]) -> list[Hit]:
        out = []
        for (source, key, index, digest), score in zip(refs, scores, strict=True):
            row = self._db.execute(
                self._HIT + f"WHERE d.source = ? AND d.key = ? AND c.idx = ? AND c.digest = ? "
                f"AND {INDEXED}",
                (source, key, index, digest),
            ).fetchone()
            if row is not None:
                out.append(as_hit(row, score=score))
        return out

    def window(self, hit: Hit, budget: int) -> Window:
        # The text is sliced in SQLite: selected beside each chunk row, it would be
        # a copy of the whole document per chunk.
        rows = self._db.execute(
            "SELECT c.idx, c.start, c.\"end\", c.tokens, c.section FROM documents d "
            f"JOIN chunks c ON {CURRENT} "
            "WHERE d.source = ? AND d.key = ? ORDER BY c.idx",
            (hit.source, hit.key),
        ).fetchall()
        span = window_span(rows, hit.index, budget)
        if span is None:
            return Window(hit.index, hit.index, hit.text, 0)
        first, last, tokens = span
        start, end = rows[first][1], rows[last][2]
        text = self._db.execute(
            "SELECT substr(CAST(t.text AS TEXT), ?, ?) FROM documents d "
            f"JOIN versions t ON {CURRENT_TEXT} WHERE d.source = ? AND d.key = ?",
            (start + 1, end - start, hit.source, hit.key),
        ).fetchone()
        if text is None:  # the document's text is gone (verify says so): the chunk alone
            return Window(hit.index, hit.index, hit.text, 0)
        return Window(first, last, text[0], tokens)

    def indexed_chunks(self, source: str | None = None, key: str | None = None,
                       filters: Filters | None = None) -> Iterator[ChunkRef]:
        sql = (f"SELECT d.source, d.key, c.idx, c.digest, c.heading, c.start, c.\"end\" "
               f"FROM documents d JOIN chunks c ON {CURRENT} WHERE {INDEXED}")
        args: list[str] = []
        for column, value in (("source", source), ("key", key)):
            if value is not None:
                sql += f" AND d.{column} = ?"
                args.append(value)
        if filters:
            where, more = sqlite_condition(filters)
            sql = sql.replace(" JOIN chunks", " CROSS JOIN chunks", 1) + f" AND {where}"
            args += more
        for row in self._db.execute(sql + " ORDER BY d.source, d.key, c.idx", args).fetchall():
            yield ChunkRef(*row)

    def vectors(self, embedder: str,
                digests: Collection[str]) -> dict[str, npt.NDArray[np.float32]]:
        found: dict[str, npt.NDArray[np.float32]] = {}
        items = list(digests)
        for i in range(0, len(items), 500):
            batch = items[i : i + 500]
            marks = ",".join("?" * len(batch))
            for digest, blob in self._db.execute(
                f"SELECT digest, vector FROM embeddings WHERE embedder = ? AND digest IN ({marks})",
                (embedder, *batch),
            ):
                found[digest] = np.frombuffer(blob, dtype=np.float32)
        return found

    def embedder_dimensions(self) -> dict[str, int]:
        return {r[0][len(DIMENSION_PREFIX):]: int(r[1]) for r in self._db.execute(
            f"SELECT name, value FROM meta WHERE {_DIMENSIONS}")}

    # -- documents and status --------------------------------------------------------

    def document(self, key: str, source: str | None = None, *,
                 previous: bool = True) -> DocumentText | None:
        before = "CAST(p.text AS TEXT)" if previous else "NULL"
        sql = (f"SELECT d.source, d.key, d.title, CAST(t.text AS TEXT), {before}, "
               "d.generation, d.last_changed, m.moved_from, m.moved "
               f"FROM documents d JOIN versions t ON {CURRENT_TEXT} LEFT JOIN versions p "
               "ON p.doc_id = d.id AND p.generation = d.generation - 1 "
               "LEFT JOIN moves m ON m.doc_id = d.id WHERE d.key = ?")
        args: tuple[str, ...] = (key,)
        if source is not None:
            sql += " AND d.source = ?"
            args = (key, source)
        row = self._db.execute(sql, args).fetchone()
        if row is None:
            return None
        return DocumentText(*row)

    def text_pieces(self, source: str, key: str) -> Iterator[str]:
        row = self._db.execute(
            f"SELECT t.rowid, typeof(t.text) FROM documents d JOIN versions t ON {CURRENT_TEXT} "
            "WHERE d.source = ? AND d.key = ?", (source, key)).fetchone()
        if row is None:
            return
        if row[1] != "blob":  # a text written whole (see _write_text)
            yield self._db.execute("SELECT text FROM versions WHERE rowid = ?",
                                   (row[0],)).fetchone()[0]
            return
        decoder = codecs.getincrementaldecoder("utf-8")()
        with self._db.blobopen("versions", "text", row[0], readonly=True) as blob:
            while piece := blob.read(_TEXT_PIECE):
                yield decoder.decode(piece)
        yield decoder.decode(b"", final=True)

    def status(self) -> StoreStatus:
        db = self._db
        by_source = dict(db.execute("SELECT source, count(*) FROM documents GROUP BY source"))
        last = db.execute("SELECT report FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return StoreStatus(
            documents=sum(by_source.values()),
            chunks=db.execute(
                f"SELECT count(*) FROM chunks c JOIN documents d ON {CURRENT}").fetchone()[0],
            embeddings=db.execute("SELECT count(*) FROM embeddings").fetchone()[0],
            runs=db.execute("SELECT count(*) FROM runs").fetchone()[0],
            by_source=by_source,
            last_run=json.loads(last[0]) if last else None,
        )

    # -- maintenance -----------------------------------------------------------------

    def verify(self, embedder: str, identity: Callable[[str], str] | None,
               derivations: Collection[str] | None = None) -> list[str]:
        # SQLite's own checks of the file come first: on a damaged file the logical
        # checks below may fail or mislead. (integrity_check reads every page of a
        # 100 MB store in under a second, so it always runs; see docs/reliability.md.)
        damage = self.damage()
        try:
            # One read transaction: a sync committing meanwhile must not look like damage.
            with self._snapshot():
                return damage + self._verify(embedder, identity, derivations)
        except sqlite3.DatabaseError:
            if damage:
                return damage
            raise

    def damage(self) -> list[str]:
        """What SQLite finds wrong with the file and with the full-text index, as one
        line each that says what to do (empty when both are sound)."""
        found = []
        rows = ["ok"]
        # quick_check names the bad page where integrity_check can give up with a
        # bare "malformed"; integrity_check also compares every index with its table.
        for check in ("quick_check(20)", "integrity_check(20)"):
            try:
                rows = [str(r[0]) for r in self._db.execute(f"PRAGMA {check}")]
            except sqlite3.DatabaseError as exc:
                rows = [str(exc)]
            if rows != ["ok"]:
                break
        if rows != ["ok"]:
            lines = [line.strip() for row in rows for line in row.splitlines()
                     if line.strip() and not line.startswith("***")]
            more = f" and {len(lines) - 1} more" if len(lines) > 1 else ""
            found.append(f"{self.path}: the store file is damaged ({lines[0]}{more}); "
                         f"{REPAIR}")
        fts = self._fts_damage()
        if fts:
            found.append(f"{self.path}: the full-text index is damaged ({fts}); run "
                         "`kbsync verify --repair` to rebuild it from the chunks")
        return found

    def _fts_damage(self) -> str | None:
        """FTS5's own integrity check of the full-text index: its finding, or None.

        The check is an INSERT, so a read-only store runs it on a copy in memory, if
        the store is small enough (else only ``integrity_check``, which reads the
        full-text table's pages too, speaks for it).
        """
        check = "INSERT INTO chunk_fts (chunk_fts) VALUES ('integrity-check')"
        db = self._db
        copy = None
        try:
            if self.read_only:
                if self.path.stat().st_size > _READ_ONLY_FTS_CHECK_LIMIT:
                    return None
                copy = sqlite3.connect(":memory:")
                self._db.backup(copy)
                db = copy
            db.execute(check)
        except sqlite3.DatabaseError as exc:
            return " ".join(str(exc).split())
        finally:
            if copy is not None:
                copy.close()
        return None

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """A read transaction: every query inside sees the same committed state."""
        if self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            self._db.execute("ROLLBACK")

    def _verify(self, embedder: str, identity: Callable[[str], str] | None,
                derivations: Collection[str] | None) -> list[str]:
        db = self._db
        problems = invariants.problems(
            db.execute, embedder, identity, mark="?", derivations=derivations,
            bad_vectors="SELECT count(*) FROM embeddings WHERE length(vector) != 4 * dimension")
        return problems + self._version_problems() + self._fts_drift()

    def _version_problems(self) -> list[str]:
        """Each document has the text of its current generation, and of at most the one
        before it."""
        found = []
        for source, key, current, other in self._db.execute(
            "SELECT d.source, d.key, sum(v.generation = d.generation), "
            "sum(v.generation NOT IN (d.generation, d.generation - 1)) FROM documents d "
            "LEFT JOIN versions v ON v.doc_id = d.id GROUP BY d.id ORDER BY d.id"):
            if not current:
                found.append(f"{source}:{key}: the text of its current version is missing")
            if other:
                found.append(f"{source}:{key}: {other} text(s) of versions before the previous")
        return found

    def repair(self, rechunk: Callable[[str], Mapping[str, str]]) -> list[str]:
        """Rebuild what the store holds twice: its indexes, the full-text index (from the
        chunks) and missing chunk texts (``rechunk`` maps a document's text to the
        digests and texts of its chunks). What was done, as lines for a person.

        Damage to the tables themselves is not repaired here: only a fresh store
        built from the sources helps then (:func:`salvage_embeddings`, :func:`swap_in`).
        """
        done = []
        steps: tuple[tuple[str, Callable[[], int]], ...] = (
            ("the indexes", self._reindex),
            ("the chunk texts", lambda: self._restore_chunk_texts(rechunk)),
            ("the full-text index", self._rebuild_fts),
        )
        for what, step in steps:
            try:
                count = step()
            except (StoreError, sqlite3.DatabaseError) as exc:
                # Damage in the tables themselves stops a step: then only a rebuild helps.
                reason = exc.__cause__ or exc
                done.append(f"could not rebuild {what}: {' '.join(str(reason).split())[:200]}")
                continue
            if count:
                done.append(f"rebuilt {what}" + (f" ({count} restored from the documents' "
                                                 "text)" if what == "the chunk texts" else ""))
        self._vectors.clear()
        return done

    def _reindex(self) -> int:
        """Every index built again from its table, if SQLite's check finds fault; 1 if so.

        An index whose pages are damaged cannot even be dropped (SQLite walks its
        pages to free them): such an index, or the full-text table, is removed from
        the schema instead, the file rewritten without it (VACUUM), and the index
        created again (the full-text table is refilled by :meth:`_rebuild_fts`).
        """
        if not self._file_damage():
            return 0
        with contextlib.suppress(StoreError), self._transaction() as db:
            db.execute("REINDEX")
        damage = self._file_damage()
        if damage:
            derived = self._damaged_derived(damage)
            if not derived:
                raise StoreError(f"{self.path}: the damage is in tables that only the sources "
                                 f"can fill again ({damage[0]})")
            self._forget(derived)
        return 1

    def _file_damage(self) -> list[str]:
        return [line for line in self.damage() if "store file is damaged" in line]

    def _damaged_derived(self, damage: Sequence[str]) -> dict[str, str | None]:
        """Name -> SQL of the derived structures that hold damage: explicit indexes, the
        full-text table and the chunk texts (cut again from the documents' text).

        Empty when a table that only the sources can fill is damaged too. The owners
        are the b-trees of the pages the report names or, where it names none, the
        tables whose own ``quick_check`` fails.
        """
        pages = {int(n) for line in damage for n in re.findall(r"[Pp]age (\d+)", line)}
        rows = self._db.execute("SELECT name, type, sql, tbl_name FROM sqlite_schema").fetchall()
        schema = {r[0]: (r[1], r[2]) for r in rows}
        texts_indexes = [r[0] for r in rows
                         if r[1] == "index" and r[3] == "chunk_texts" and r[2] is not None]
        owners: set[str] = set()
        for page in sorted(pages):
            with contextlib.suppress(sqlite3.DatabaseError):
                owners.update(r[0] for r in self._db.execute(
                    "SELECT name FROM dbstat WHERE pageno = ?", (page,)))
        if not owners:
            for name, (kind, _) in schema.items():
                if kind != "table":
                    continue
                try:
                    sound = [r[0] for r in self._db.execute(
                        f'PRAGMA quick_check("{name}")')] == ["ok"]
                except sqlite3.DatabaseError:
                    sound = False
                if not sound:
                    owners.add(name)
        derived: dict[str, str | None] = {}
        for name in owners:
            kind, sql = schema.get(name, ("", None))
            if name.startswith("chunk_fts"):
                derived.update({n: None for n in schema if n.startswith("chunk_fts")})
            elif name in ("chunk_texts", "sqlite_autoindex_chunk_texts_1"):
                derived["sqlite_autoindex_chunk_texts_1"] = None
                derived["chunk_texts"] = schema["chunk_texts"][1]
                for index in texts_indexes:  # made again after the table they index
                    derived.pop(index, None)
                    derived[index] = schema[index][1]
            elif kind == "index" and sql is not None and name not in derived:
                derived[name] = sql
            else:
                return {}  # a table, or the index of a constraint: only a rebuild helps
        return derived

    def _forget(self, derived: Mapping[str, str | None]) -> None:
        """Remove ``derived`` from the schema, rewrite the file, create the indexes anew."""
        self._db.execute("PRAGMA writable_schema = ON")
        try:
            with self._transaction() as db:
                db.executemany("DELETE FROM sqlite_schema WHERE name = ?",
                               ((n,) for n in derived))
        finally:
            self._db.execute("PRAGMA writable_schema = OFF")
        # The connection still holds the old schema: read it again from the file.
        self._db.close()
        self._db = self._connect()
        self._configure()
        self._db.execute("VACUUM")
        with self._transaction() as db:
            for sql in derived.values():
                if sql is not None:
                    db.execute(sql)

    def _fts_drift(self) -> list[str]:
        """How the full-text table differs from the current chunks (it keeps its own copy)."""
        indexed = {r[0] for r in self._db.execute("SELECT rowid FROM chunk_fts")}
        current = {r[0] for r in self._db.execute(
            f"SELECT c.id FROM chunks c JOIN documents d ON {CURRENT}")}
        found = []
        if indexed - current:
            found.append(f"{len(indexed - current)} full-text rows of no current chunk")
        if current - indexed:
            found.append(f"{len(current - indexed)} current chunks missing from full text")
        return found

    def _rebuild_fts(self) -> int:
        """The full-text table made anew from the current chunks and their texts, if it is
        damaged or has drifted from them; 1 if so.

        FTS5's own 'rebuild' reads the table's copy of the texts, which may be what
        is damaged; dropping and refilling it depends on the chunks only.
        """
        if self._fts_damage() is None and not self._fts_drift():
            return 0
        with self._transaction() as db:
            db.execute("DROP TABLE IF EXISTS chunk_fts")
            db.execute(_FTS_TABLE)
            db.execute(f"INSERT INTO chunk_fts (rowid, text, heading) SELECT c.id, t.text, "
                       f"{_FTS_HEADING} FROM chunks c JOIN documents d ON {CURRENT} "
                       "JOIN chunk_texts t ON t.digest = c.digest")
        return 1

    def _restore_chunk_texts(self, rechunk: Callable[[str], Mapping[str, str]]) -> int:
        """Texts of chunks that have none, cut again from their document's current or
        previous text (the two generations a document keeps); how many."""
        rows = self._db.execute(
            "SELECT c.doc_id, group_concat(c.digest) FROM chunks c LEFT JOIN chunk_texts t "
            "ON t.digest = c.digest WHERE t.digest IS NULL GROUP BY c.doc_id").fetchall()
        restored = 0
        for doc_id, digests in rows:
            texts = [r[0] for r in self._db.execute(
                "SELECT CAST(text AS TEXT) FROM versions WHERE doc_id = ?", (doc_id,))]
            cut = {d: t for text in texts for d, t in rechunk(text).items()}
            found = [(d, cut[d]) for d in set(digests.split(",")) if d in cut]
            with self._transaction() as db:
                db.executemany("INSERT OR IGNORE INTO chunk_texts (digest, text, text_key) "
                               "VALUES (?, ?, ?)",
                               [(d, t, embedding_text_key(t)) for d, t in found])
            restored += len(found)
        return restored

    def add_erasure(self, pattern: str, created: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO erasures (pattern, created) VALUES (?, ?) "
                       "ON CONFLICT (pattern) DO NOTHING", (pattern, created))

    def erasures(self) -> list[tuple[str, str]]:
        return [(str(r[0]), str(r[1])) for r in self._db.execute(
            "SELECT pattern, created FROM erasures ORDER BY pattern")]

    def remove_erasure(self, pattern: str) -> bool:
        with self._transaction() as db:
            return db.execute("DELETE FROM erasures WHERE pattern = ?", (pattern,)).rowcount > 0

    def erase(self, pattern: str) -> list[tuple[str, str]]:
        gone = erased(self._db.execute("SELECT source, key FROM documents").fetchall(), pattern)
        for source, key in gone:
            with self._transaction() as db:
                digests = [r[0] for r in db.execute(
                    "SELECT DISTINCT c.digest FROM documents d JOIN chunks c ON c.doc_id = d.id "
                    "WHERE d.source = ? AND d.key = ?", (source, key))]
                self._delete(source, key)
                self._scrub_runs(key)
                self._drop_unreferenced(digests)
        self._vectors.clear()
        # Even when nothing matched: a rerun of an interrupted erase finishes its scrub.
        self.gc()
        return gone

    def _drop_unreferenced(self, digests: list[str]) -> None:
        """Texts and vectors of ``digests`` that no chunk refers to any more."""
        for i in range(0, len(digests), 500):
            batch = digests[i : i + 500]
            marks = ",".join("?" * len(batch))
            for table in ("chunk_texts", "embeddings"):
                crashpoint("store.erase_derived")
                self._db.execute(
                    f"DELETE FROM {table} WHERE digest IN ({marks}) "
                    "AND digest NOT IN (SELECT digest FROM chunks)", batch)

    def _scrub_runs(self, key: str) -> None:
        """Erasure covers run reports too: the erased key is replaced wherever it appears."""
        quoted = json.dumps(key)
        for run_id, report in self._db.execute(
            "SELECT id, report FROM runs WHERE instr(report, ?) > 0", (quoted,)
        ).fetchall():
            crashpoint("store.scrub_run")
            self._db.execute("UPDATE runs SET report = ? WHERE id = ?",
                             (report.replace(quoted, '"[erased]"'), run_id))

    def gc(self) -> dict[str, int]:
        db = self._db
        with self._transaction():
            texts = db.execute(
                "DELETE FROM chunk_texts WHERE digest NOT IN (SELECT digest FROM chunks)"
            ).rowcount
            crashpoint("store.gc_vectors")
            vectors = db.execute(
                "DELETE FROM embeddings WHERE digest NOT IN (SELECT digest FROM chunks)"
            ).rowcount
            db.execute(f"DELETE FROM meta WHERE {_DIMENSIONS} AND substr(name, "
                       f"{len(DIMENSION_PREFIX) + 1}) NOT IN (SELECT embedder FROM embeddings)")
        self._vectors.clear()
        # Deleted rows can live on in full-text segments, free pages and the WAL: merge
        # the segments, rewrite the file and empty the WAL so no byte of them is left.
        for point, sql in (("store.fts_optimize", "INSERT INTO chunk_fts (chunk_fts) "
                                                  "VALUES ('optimize')"),
                           ("store.vacuum", "VACUUM"),
                           ("store.checkpoint", "PRAGMA wal_checkpoint(TRUNCATE)")):
            try:
                crashpoint(point)
                db.execute(sql)
            except (sqlite3.Error, OSError) as exc:
                raise store_error(str(self.path), exc, "cannot compact the store") from exc
        return {"chunk_texts": texts, "embeddings": vectors}


# The largest read-only store whose full-text index verify checks on a copy in memory.
_READ_ONLY_FTS_CHECK_LIMIT = 1 << 30

#: A document text of more characters than this is written through incremental blob I/O.
BIG_TEXT = 1_000_000
_TEXT_PIECE = 1 << 20


def _write_text(db: sqlite3.Connection, doc_id: int, generation: int, text: str) -> None:
    """Store ``text`` as the text of version ``generation`` of the document ``doc_id``.

    A big text is inserted as a zeroblob of its UTF-8 length and then written a
    megabyte at a time: bound whole, SQLite would copy it and build its row from the
    copy (twice the text, and the UTF-8 form of a non-ASCII ``str`` besides). Such a
    value is a BLOB of UTF-8 bytes; every reader takes ``CAST(text AS TEXT)``, which
    reads either kind as the same string.
    """
    sql = "INSERT INTO versions (doc_id, generation, text) VALUES (?, ?, {})"
    if len(text) <= BIG_TEXT:
        db.execute(sql.format("?"), (doc_id, generation, text))
        return
    pieces = range(0, len(text), _TEXT_PIECE)
    size = len(text) if text.isascii() else sum(
        len(text[i : i + _TEXT_PIECE].encode("utf-8")) for i in pieces)
    row = db.execute(sql.format("zeroblob(?)"), (doc_id, generation, size)).lastrowid
    assert row is not None
    with db.blobopen("versions", "text", row) as blob:
        for i in pieces:
            blob.write(text[i : i + _TEXT_PIECE].encode("utf-8"))


def salvage_embeddings(damaged: Path, into: SqliteStore) -> int:
    """Copy every readable cached vector of the store file ``damaged`` into ``into``; how many.

    Rows are read in rowid order; where a damaged page stops the reading, the
    rest is read from the other end, so one bad page costs only the rows on it.
    """
    db = sqlite3.connect(f"{damaged.resolve().as_uri()}?mode=ro", uri=True)
    rows: dict[tuple[str, str], tuple[int, bytes]] = {}
    sql = "SELECT rowid, digest, embedder, dimension, vector FROM embeddings "
    try:
        last = 0
        try:
            for rowid, digest, embedder, dimension, vector in db.execute(sql + "ORDER BY rowid"):
                rows[(digest, embedder)] = (dimension, vector)
                last = rowid
        except sqlite3.DatabaseError:
            with contextlib.suppress(sqlite3.DatabaseError):
                for _, digest, embedder, dimension, vector in db.execute(
                        sql + "WHERE rowid > ? ORDER BY rowid DESC", (last,)):
                    rows[(digest, embedder)] = (dimension, vector)
    except sqlite3.DatabaseError:
        pass  # not even the table is readable: nothing to salvage
    finally:
        db.close()
    by_embedder: dict[str, dict[str, npt.NDArray[np.float32]]] = {}
    for (digest, embedder), (dimension, vector) in rows.items():
        if isinstance(vector, bytes) and len(vector) == 4 * dimension:
            by_embedder.setdefault(embedder, {})[digest] = np.frombuffer(vector, np.float32)
    for embedder, vectors in by_embedder.items():
        into.put_vectors(embedder, vectors)
    return sum(len(v) for v in by_embedder.values())


def carry_erasures(damaged: Path, into: SqliteStore) -> int:
    """Copy the erasures of the store file ``damaged`` into ``into``; how many.

    Unlike a lost vector, a lost erasure would bring an erased document back, so an
    erasures table that cannot be read in full is a StoreError, not a partial copy.
    """
    db = sqlite3.connect(f"{damaged.resolve().as_uri()}?mode=ro", uri=True)
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'erasures'").fetchone() is None:
            return 0  # a store from before erasures were remembered
        rows = db.execute("SELECT pattern, created FROM erasures").fetchall()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{damaged}: its erasures cannot be read ({exc}), so a rebuilt store "
                         "could bring erased documents back; nothing was rebuilt") from exc
    finally:
        db.close()
    for pattern, created in rows:
        into.add_erasure(str(pattern), str(created))
    return len(rows)


def swap_in(fresh: Path, live: Path, backup: Path) -> None:
    """Put the closed store file ``fresh`` in place of ``live``, keeping the old one as ``backup``.

    The old file is hard-linked to ``backup`` first and replaced by one rename, so
    at every moment ``live`` is the old store or the new one; its write-ahead log
    goes with the backup, lest SQLite replay it onto the new file.
    """
    try:
        for name in (backup, *_companions(backup)):
            name.unlink(missing_ok=True)
        crashpoint("store.rebuild_backup")
        os.link(live, backup)
        for old, kept in zip(_companions(live), _companions(backup), strict=True):
            if old.exists():
                os.replace(old, kept)
        crashpoint("store.rebuild_swap")
        os.replace(fresh, live)
        folder = os.open(live.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        raise store_error(str(live), exc, "cannot put the rebuilt store in place") from exc


def _companions(path: Path) -> tuple[Path, Path]:
    """The write-ahead log and shared-memory files SQLite keeps beside ``path``."""
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def _writable(path: Path) -> bool:
    """Whether the store file and its folder (for the WAL) can be written.

    ``access`` honours read-only mounts and immutable files even for root, whom
    permission bits do not stop.
    """
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _prepare_state(path: Path) -> None:
    """Create the state directory (0700) and the store file (0600); refuse a shared directory.

    Whoever can write the state directory can swap the store or its WAL for their
    own; SQLite gives the WAL and shared-memory files the store file's mode.
    """
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = folder.stat().st_mode
    except OSError as exc:
        raise StoreError(f"{folder}: cannot create the state directory: {exc}") from exc
    if mode & stat.S_IWOTH:
        raise StoreError(f"{folder}: the state directory is writable by every user, so anyone "
                         "could replace the store; use a private folder (chmod 700)")
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the store: {exc}") from exc
