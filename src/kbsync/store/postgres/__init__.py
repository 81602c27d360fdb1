"""The scale-out record store: PostgreSQL, with pgvector for vectors and tsvector for full text.

The logical schema is the SQLite store's (documents with at most two chunk
generations, content-addressed chunk texts, the embedding cache, runs,
boilerplate, meta), so a sync behaves the same on either. Records and vectors
of a document commit in one transaction.

Vectors of different embedders and dimensions share one ``embeddings`` table
with an untyped ``vector`` column: an HNSW index needs a fixed dimension, so
each dimension gets its own partial expression index
(``(vector::vector(N)) WHERE dimension = N``), built at the end of the sync that
takes that dimension past ``ann_above`` vectors (below, searches compare every
vector: :mod:`~kbsync.store.postgres.indexes`). One table keeps the cache a single key space
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

The store is the SQL core (:mod:`kbsync.store.sql`) over PostgreSQL's dialect
(:mod:`~kbsync.store.postgres.dialect`) and connection
(:mod:`~kbsync.store.postgres.connection`), with a mixin for each of what is its own: the
indexes a first load defers (``indexes``), the kept texts (``documents``), vacuuming after an
erasure (``erasure``), ``search``, checks and ``repair``, and the work ``queue``; the
schema is in :mod:`~kbsync.store.postgres.schema`.
"""

from __future__ import annotations

from kbsync.store.guard import guarded
from kbsync.store.postgres.connection import AdvisoryLock, is_driver_error, shown
from kbsync.store.postgres.erasure import ErasureTables
from kbsync.store.postgres.queue import Claim, QueueTables
from kbsync.store.postgres.repair import RepairTables
from kbsync.store.postgres.schema import SCHEMA_VERSION
from kbsync.store.postgres.search import SearchTables
from kbsync.store.sql import SqlStore

__all__ = ["SCHEMA_VERSION", "AdvisoryLock", "Claim", "PostgresStore"]


@guarded(lambda store: shown(store.url), is_driver_error)
class PostgresStore(QueueTables, ErasureTables, SearchTables, RepairTables, SqlStore):
    """A :class:`~kbsync.store.RecordStore` in a PostgreSQL database (one schema of it).

    ``password`` comes from the caller (an environment variable named in the
    configuration); without it libpq reads ``PGPASSWORD``, a service file or
    ``~/.pgpass``. ``schema`` keeps several knowledge bases in one database.
    With ``create`` false a database without kbsync's tables is an error
    instead of being set up. ``index_memory`` is the ``maintenance_work_mem`` of
    building an index (such as ``"1GB"``): an HNSW graph that does not fit
    in it is built on disk, many times more slowly; without it the server's
    setting holds, raised to what a build after a first load needs (up to 1 GB).
    ``ann_above`` is the count of one dimension's vectors above which its HNSW index is
    built (0: never).
    """
