"""The PostgreSQL store's schema: its migrations and the constants its queries share."""

from __future__ import annotations

from kbsync.core.identity import embedding_text_key_sql
from kbsync.store.rows import DIMENSION_PREFIX
from kbsync.store.sql.schema import COUNTS_INDEX, COUNTS_TABLE

__all__ = ["ANN_ABOVE", "DIGEST_COUNTS_VERSION", "HEADING_WEIGHT", "HNSW_MAX_DIMENSION",
           "MIGRATIONS",
           "SCHEMA_VERSION"]


MIGRATIONS: tuple[str, ...] = (
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
    # tokenizer does; search weights a chunk's heading above its body (HEADING_WEIGHT).
    """
    ALTER TABLE chunk_texts DROP COLUMN tsv;
    ALTER TABLE chunk_texts
        ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED;
    CREATE INDEX chunk_texts_tsv ON chunk_texts USING gin (tsv);
    """,
    # 7: revisit schedules of web pages (kbsync.core.schedule): when each page was last
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
    # 9: each chunk text's embedding key (kbsync.core.identity.embedding_text_key), so a chunk
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
    # 11: each kept text has its checksum beside it (kbsync.core.identity.embedding_text_key
    # of the text), which verify compares the text with: damage inside a text breaks no link.
    f"""
    ALTER TABLE texts ADD COLUMN text_key BYTEA, ADD COLUMN previous_key BYTEA;
    UPDATE texts SET text_key = {embedding_text_key_sql("text")},
        previous_key = CASE WHEN previous IS NULL THEN NULL
                            ELSE {embedding_text_key_sql("previous")} END;
    """,
    # 12: whether a document's stat was taken too close to its listing to be trusted
    # (kbsync.model.SourceStat.racy): the next sync compares its bytes. Stats recorded
    # before are trusted as they were (`sync --verify` reads every file once).
    """
    ALTER TABLE documents ADD COLUMN IF NOT EXISTS racy BOOLEAN NOT NULL DEFAULT false;
    """,
    # 13: parallel workers claim documents a batch at a time and delete the claimed rows
    # when the batch commits; each batch's tally waits here for the coordinator.
    """
    CREATE TABLE IF NOT EXISTS work_results (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run TEXT NOT NULL,
        source TEXT NOT NULL,
        result JSONB NOT NULL
    );
    CREATE INDEX IF NOT EXISTS work_results_run ON work_results (run, source);
    """,
    # 14: a parallel run observes its documents first (read, extracted, chunked: the
    # observation waits in the queue with the facts the coordinator decides on), then
    # plans and applies them once the coordinator has decided on the whole source; each
    # batch's tally names its phase and first key, so the coordinator merges them in
    # the order one process would have made them.
    """
    ALTER TABLE work ADD COLUMN IF NOT EXISTS observation BYTEA;
    ALTER TABLE work_results ADD COLUMN IF NOT EXISTS phase SMALLINT NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS first_key TEXT NOT NULL DEFAULT '';
    CREATE INDEX IF NOT EXISTS work_ready ON work (run, source, key) WHERE state = 'ready';
    """,
    # 15: how many documents of each source (and host) hold each chunk digest, kept as
    # documents are written (kbsync.store.sql.digests), so that deciding boilerplate reads
    # the counts near its threshold instead of every digest of the source; filled by
    # counting the current chunks (PostgresBase._open).
    f"""
    CREATE TABLE IF NOT EXISTS {COUNTS_TABLE.removeprefix("CREATE TABLE ")};
    CREATE INDEX IF NOT EXISTS {COUNTS_INDEX.removeprefix("CREATE INDEX ")};
    """,
    # 16: the observations waiting in the queue are kept uncompressed: each lives for one
    # run, and compressing them (pglz) took 4.0 of the server's 25 s in a parallel first
    # sync of 3,000 files (1.3 s without).
    """
    ALTER TABLE work ALTER COLUMN observation SET STORAGE EXTERNAL;
    """,
)

DIGEST_COUNTS_VERSION = 15
"""The version whose migration adds the digest counts, which are then counted."""


# The weight class of a chunk's heading in ts_rank (body text is 'D', 0.1; 'C' is 0.2):
# twice the body's, like SQLite's bm25 column weights.
HEADING_WEIGHT = "C"


SCHEMA_VERSION = len(MIGRATIONS)


# pgvector indexes `vector` columns of at most 2,000 dimensions with HNSW.
HNSW_MAX_DIMENSION = 2000


ANN_ABOVE = 100_000
"""The vectors of one dimension above which its HNSW index is built (``[store] ann_above``):
below, an exact search is quick enough (a scan of them) and the build would cost a first
load more than it saves (docs/store-backends.md, "Vector search")."""
