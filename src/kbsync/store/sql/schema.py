"""The logical schema every store of the SQL core holds, as CREATE statements in a database's types.

SQLite and PostgreSQL make it through their own numbered migrations (their history);
a new backend can make it from here at once. ``tests/integration/test_toy_store.py``
holds these tables to SQLite's migrated ones, column for column.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbsync.core.plan import BOILERPLATE_MIN_DOCUMENTS

__all__ = ["COUNTS_INDEX", "COUNTS_TABLE", "SchemaTypes", "create_statements"]

COUNTS_TABLE = ("CREATE TABLE digest_counts (source TEXT NOT NULL, grp TEXT NOT NULL, "
                "digest TEXT NOT NULL, documents INTEGER NOT NULL, "
                "PRIMARY KEY (source, grp, digest))")
"""How many documents of a source (and host group) hold each chunk digest, the empty digest
counting the group's documents that have chunks (:mod:`kbsync.store.sql.digests`); a
backend may add its own clauses (SQLite's WITHOUT ROWID)."""

COUNTS_INDEX = ("CREATE INDEX digest_counts_common ON digest_counts (source, grp, documents) "
                f"WHERE documents >= {BOILERPLATE_MIN_DOCUMENTS}")
"""The counts that can be boilerplate, by size: most digests are in one or two documents,
and their counts change without touching it."""


@dataclass(frozen=True, slots=True)
class SchemaTypes:
    """The column types of one database, as its CREATE statements name them."""

    id: str = "INTEGER PRIMARY KEY"
    """A row id the database assigns."""
    bytes: str = "BLOB"
    vector: str = "BLOB"
    real: str = "REAL"
    flag: str = "INTEGER NOT NULL DEFAULT 0"
    """A yes-or-no column, no by default."""


_TABLES = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents (
    id {id}, source TEXT NOT NULL, key TEXT NOT NULL, locator TEXT NOT NULL,
    media_type TEXT NOT NULL, size BIGINT, mtime_ns BIGINT, inode BIGINT, racy {flag},
    etag TEXT, last_modified TEXT, bytes_hash TEXT NOT NULL, text_hash TEXT NOT NULL,
    derivation TEXT NOT NULL, title TEXT, metadata TEXT NOT NULL DEFAULT '{{}}',
    status TEXT NOT NULL DEFAULT 'ok', generation INTEGER NOT NULL, first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL, last_changed TEXT NOT NULL, missing INTEGER NOT NULL DEFAULT 0,
    UNIQUE (source, key));
CREATE TABLE chunks (
    id {id}, doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    generation INTEGER NOT NULL, idx INTEGER NOT NULL, digest TEXT NOT NULL,
    section INTEGER NOT NULL, heading TEXT, start INTEGER NOT NULL, "end" INTEGER NOT NULL,
    tokens INTEGER NOT NULL, boundary TEXT NOT NULL, UNIQUE (doc_id, generation, idx));
CREATE INDEX chunks_digest ON chunks (digest);
CREATE TABLE chunk_texts (digest TEXT PRIMARY KEY, text TEXT NOT NULL, text_key {bytes});
CREATE INDEX chunk_texts_key ON chunk_texts (text_key);
CREATE TABLE versions (
    doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    generation INTEGER NOT NULL, text_key {bytes}, text TEXT NOT NULL,
    PRIMARY KEY (doc_id, generation));
CREATE TABLE embeddings (
    digest TEXT NOT NULL, embedder TEXT NOT NULL, dimension INTEGER NOT NULL,
    vector {vector} NOT NULL, PRIMARY KEY (digest, embedder));
CREATE TABLE runs (id {id}, started TEXT NOT NULL, finished TEXT NOT NULL, report TEXT NOT NULL);
CREATE TABLE boilerplate (source TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (source, digest));
CREATE TABLE outbox (id {id}, vector_id TEXT NOT NULL UNIQUE);
CREATE TABLE frontier (source TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (source, key));
CREATE TABLE erasures (pattern TEXT PRIMARY KEY, created TEXT NOT NULL);
CREATE TABLE schedules (
    source TEXT NOT NULL, key TEXT NOT NULL, checked {real} NOT NULL, changed {real} NOT NULL,
    interval_seconds {real} NOT NULL, digest TEXT NOT NULL, media_type TEXT NOT NULL,
    PRIMARY KEY (source, key));
CREATE TABLE moves (
    doc_id BIGINT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    moved_from TEXT NOT NULL, moved TEXT NOT NULL);
{counts};
{counts_index}
"""


def create_statements(types: SchemaTypes = SchemaTypes()) -> list[str]:
    """The statements that make the logical schema, one table or index each (the kept
    texts in ``versions``, a row per generation)."""
    sql = _TABLES.format(id=types.id, bytes=types.bytes, vector=types.vector, real=types.real,
                         flag=types.flag, counts=COUNTS_TABLE, counts_index=COUNTS_INDEX)
    return [" ".join(statement.split()) for statement in sql.split(";")]
