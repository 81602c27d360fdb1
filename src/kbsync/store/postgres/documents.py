"""The manifest: documents, their versions and chunks, written one plan at a time."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import ChunkDraft, DocumentPlan, StoredDocument
from kbsync.crashpoints import crashpoint
from kbsync.model import PageSchedule
from kbsync.store import DocumentText
from kbsync.store.postgres.embeddings import EmbeddingTables
from kbsync.store.rows import (
    CURRENT,
    MANIFEST_COLUMNS,
    held_meta_name,
    stat_row,
    stored_document,
    validator_row,
)
from kbsync.store.writes import PlanWrites

__all__ = ["DocumentTables"]


class DocumentTables(EmbeddingTables, PlanWrites):
    """The manifest and document roles of the PostgreSQL store (a plan writes its vectors too)."""

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

    def apply(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              outbox: Collection[str] = ()) -> None:
        if not doc.writes:
            return
        # Pipelined: the statements of a document go to the server together and its
        # transaction waits for the server once, not once per statement. None of them
        # needs an earlier one's result (rows are found by (source, key)), except a move
        # whose origin may be gone.
        with self._pipelined(), self._transaction():
            self._insert_vectors(embedder, vectors)
            if outbox:
                crashpoint("store.write_outbox")
                self._queue("INSERT INTO outbox (vector_id) SELECT unnest(%s::text[]) "
                            "ORDER BY 1 ON CONFLICT DO NOTHING", (sorted(outbox),))
            self._write_plan(source, doc, now)
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
            "mtime_ns = %s, inode = %s, racy = %s, etag = %s, last_modified = %s, bytes_hash = %s, "
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
                "UPDATE documents SET size = %s, mtime_ns = %s, inode = %s, racy = %s, "
                "etag = %s, last_modified = %s, missing = 0 WHERE source = %s AND key = %s",
                (*stat_row(doc.stat), *validator_row(doc.validators), source, doc.key),
            )
            return
        self._queue(
            "UPDATE documents SET locator = %s, media_type = %s, size = %s, mtime_ns = %s, "
            "inode = %s, racy = %s, etag = %s, last_modified = %s, bytes_hash = %s, "
            "title = %s, metadata = %s, missing = 0, last_seen = %s "
            "WHERE source = %s AND key = %s",
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
            "racy, etag, last_modified, bytes_hash, text_hash, derivation, title, metadata, "
            "generation, first_seen, last_seen, last_changed) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 1, %s, %s, %s) "
            "ON CONFLICT (source, key) DO UPDATE SET locator = excluded.locator, "
            "media_type = excluded.media_type, size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, inode = excluded.inode, racy = excluded.racy, "
            "etag = excluded.etag, "
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
        # The text's checksum, which verify compares it with, moves along with it.
        self._queue(
            "INSERT INTO texts (doc_id, text, text_key) SELECT id, %s, %s FROM documents "
            "WHERE source = %s AND key = %s ON CONFLICT (doc_id) DO UPDATE "
            "SET previous = texts.text, previous_key = texts.text_key, text = excluded.text, "
            "text_key = excluded.text_key", (version.text, embedding_text_key(version.text), *this))
        self._write_chunks(source, doc.key, version.chunks)

    def _rechunk(self, source: str, doc: DocumentPlan, now: str) -> None:
        """The same text in new chunks: the current generation's chunks are replaced, so
        its text, its previous text and when it last changed stay as they were."""
        version = doc.version
        assert version is not None
        crashpoint("store.write_document")
        self._queue(
            "UPDATE documents SET locator = %s, media_type = %s, size = %s, mtime_ns = %s, "
            "inode = %s, racy = %s, etag = %s, last_modified = %s, bytes_hash = %s, "
            "derivation = %s, title = %s, metadata = %s, missing = 0, last_seen = %s "
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
        texts = sorted({c.digest: (c.text, c.embedding_key) for c in chunks}.items())
        if texts:
            crashpoint("store.write_chunk_texts")
            self._queue(
                "INSERT INTO chunk_texts (digest, text, text_key) SELECT * FROM "
                "unnest(%s::text[], %s::text[], %s::bytea[]) AS u (digest, text, text_key) "
                "ORDER BY digest ON CONFLICT DO NOTHING",
                ([d for d, _ in texts], [t for _, (t, _) in texts],
                 [k for _, (_, k) in texts]))
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

    def mark_missing(self, source: str, key: str) -> None:
        crashpoint("store.mark_missing")
        self._write("UPDATE documents SET missing = missing + 1 WHERE source = %s AND key = %s",
                    (source, key))

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
