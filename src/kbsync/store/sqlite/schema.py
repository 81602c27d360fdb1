"""The SQLite store's schema: its migrations and the SQL fragments its queries share."""

from __future__ import annotations

from kbsync.store.rows import CURRENT, DIMENSION_PREFIX
from kbsync.store.sql.schema import COUNTS_INDEX, COUNTS_TABLE

__all__ = [
    "CURRENT_TEXT", "DIGEST_COUNTS_VERSION", "FTS_HEADING", "FTS_TABLE", "FTS_WEIGHTS",
    "MATCHING_CHUNKS",
    "MIGRATIONS", "PAGE_SIZE", "SCHEMA_VERSION", "WAL_BYTES", "fts_heading",
]

# What the full-text heading column holds for a chunk ``c`` of a document ``d``: the
# document's title and the chunk's section heading (bm25 weighs it above the body).
FTS_HEADING = "trim(coalesce(d.title, '') || ' ' || coalesce(c.heading, ''))"


def fts_heading(title: str | None, heading: str | None) -> str:
    """The heading column of a chunk's full-text row, as :data:`FTS_HEADING` makes it."""
    return f"{title or ''} {heading or ''}".strip(" ")  # SQL's trim() takes spaces only


MIGRATIONS: tuple[str, ...] = (
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
    # column of its own, weighted above the body (see FTS_WEIGHTS).
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
    INSERT INTO chunk_fts (rowid, text, heading) SELECT c.id, t.text, {FTS_HEADING}
        FROM documents d JOIN chunks c ON c.doc_id = d.id AND c.generation = d.generation
        JOIN chunk_texts t ON t.digest = c.digest;
    """,
    # 10: revisit schedules of web pages (kbsync.core.schedule): when each page was last
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
    # 12: each chunk text's embedding key (kbsync.core.identity.embedding_text_key), so a chunk
    # whose identity changed but whose text did not finds its vector by the text. (The
    # table is copied, not altered: a store rewound to an older version has the column.)
    """
    CREATE TABLE chunk_texts_keyed (digest TEXT PRIMARY KEY, text TEXT NOT NULL, text_key BLOB);
    INSERT INTO chunk_texts_keyed SELECT digest, text, kbsync_text_key(text) FROM chunk_texts;
    DROP TABLE chunk_texts;
    ALTER TABLE chunk_texts_keyed RENAME TO chunk_texts;
    CREATE INDEX chunk_texts_key ON chunk_texts (text_key);
    """,
    # 13: the dimension of each embedder's vectors kept in meta, where every sync grouped
    # all the vectors to find it (71 ms of a 10,000-file no-op sync); the entries are read
    # as a range of names, which the primary key answers (Dialect.starts_with).
    f"""
    INSERT OR IGNORE INTO meta (name, value)
        SELECT '{DIMENSION_PREFIX}' || embedder, CAST(max(dimension) AS TEXT) FROM embeddings
        GROUP BY embedder;
    """,
    # 14: each kept version's text has its checksum beside it
    # (kbsync.core.identity.embedding_text_key of the text), which verify compares the
    # text with: damage inside a text breaks no link. (The table is copied, not altered,
    # as in 12; the text stays the last column, as a big text's zeroblob must be for
    # SQLite not to build it in memory.)
    """
    CREATE TABLE versions_keyed (
        doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        generation INTEGER NOT NULL,
        text_key BLOB,
        text TEXT NOT NULL,
        PRIMARY KEY (doc_id, generation)
    );
    INSERT INTO versions_keyed (doc_id, generation, text_key, text)
        SELECT doc_id, generation, kbsync_text_key(CAST(text AS TEXT)), text FROM versions;
    DROP TABLE versions;
    ALTER TABLE versions_keyed RENAME TO versions;
    """,
    # 15: whether a document's stat was taken too close to its listing to be trusted
    # (kbsync.model.SourceStat.racy): the next sync compares its bytes. Stats recorded
    # before are trusted as they were (`sync --verify` reads every file once).
    """
    ALTER TABLE documents ADD COLUMN racy INTEGER NOT NULL DEFAULT 0;
    """,
    # 16: how many documents of each source (and host) hold each chunk digest, kept as
    # documents are written (kbsync.store.sql.digests), so that deciding boilerplate reads
    # the counts near its threshold instead of every digest of the source; filled by
    # counting the current chunks (SqliteBase._migrate).
    f"""
    CREATE TABLE IF NOT EXISTS {COUNTS_TABLE.removeprefix("CREATE TABLE ")} WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS {COUNTS_INDEX.removeprefix("CREATE INDEX ")};
    """,
)

DIGEST_COUNTS_VERSION = 16
"""The version whose migration adds the digest counts, which are then counted."""

# bm25 weights of the full-text columns (text, heading): a word of the section's
# heading says more about what a chunk is about than the same word in its body.
FTS_WEIGHTS = "1.0, 2.0"

# The full-text table as the latest migration makes it (repair makes it anew the same way).
FTS_TABLE = ("CREATE VIRTUAL TABLE chunk_fts USING fts5 "
              "(text, heading, tokenize = 'porter unicode61')")

SCHEMA_VERSION = len(MIGRATIONS)

# The ids of current chunks ``c`` of documents ``d``, to be restricted by a filter on ``d``:
# CROSS JOIN keeps documents the outer loop, so the filter runs once per document, not
# once per chunk (the planner otherwise scans chunks first).
MATCHING_CHUNKS = f"SELECT c.id FROM documents d CROSS JOIN chunks c ON {CURRENT}"

# Joins a document ``d`` to the text ``t`` of its current version.
CURRENT_TEXT = "t.doc_id = d.id AND t.generation = d.generation"

# The page size of a new store's file, and the write-ahead log's size at which a commit
# checkpoints it into the file (see SqliteBase._configure).
PAGE_SIZE = 16384

WAL_BYTES = 32 * 2**20
