"""The manifest: documents, their versions and chunks, written one plan at a time."""

from __future__ import annotations

import codecs
import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from kbsync.core.identity import embedding_text_key, embedding_text_key_of
from kbsync.core.plan import ChunkDraft, DocumentPlan, StoredDocument
from kbsync.crashpoints import crashpoint
from kbsync.model import PageSchedule
from kbsync.store import DocumentText
from kbsync.store.rows import (
    CURRENT,
    MANIFEST_COLUMNS,
    STAT_SET,
    held_meta_name,
    stat_row,
    stored_document,
    validator_row,
)
from kbsync.store.sqlite.embeddings import EmbeddingTables
from kbsync.store.sqlite.schema import CURRENT_TEXT, FTS_HEADING, fts_heading
from kbsync.store.writes import PlanWrites

__all__ = ["BIG_TEXT", "DocumentTables"]

#: A document text of more characters than this is written through incremental blob I/O.
BIG_TEXT = 1_000_000
_TEXT_PIECE = 1 << 20


class DocumentTables(EmbeddingTables, PlanWrites):
    """The manifest and document roles of the SQLite store (a plan writes its vectors too)."""

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
            self._write_plan(source, doc, now)

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
            f"UPDATE documents SET key = ?, locator = ?, media_type = ?, {STAT_SET}, "
            "etag = ?, last_modified = ?, bytes_hash = ?, title = ?, metadata = ?, "
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
                f"UPDATE documents SET {STAT_SET}, etag = ?, "
                "last_modified = ?, missing = 0 WHERE id = ?",
                (*stat_row(doc.stat), *validator_row(doc.validators), found[0]),
            )
            return
        self._db.execute(
            f"UPDATE documents SET locator = ?, media_type = ?, {STAT_SET}, "
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
            f"UPDATE chunk_fts SET heading = (SELECT {FTS_HEADING} FROM chunks c "
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
                "racy, etag, last_modified, bytes_hash, text_hash, derivation, title, metadata, "
                "generation, first_seen, last_seen, last_changed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                f"UPDATE documents SET locator = ?, media_type = ?, {STAT_SET}, "
                "etag = ?, last_modified = ?, bytes_hash = ?, text_hash = ?, "
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
            f"UPDATE documents SET locator = ?, media_type = ?, {STAT_SET}, "
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
            ((c.digest, c.text, c.embedding_key) for c in chunks),
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

    def mark_missing(self, source: str, key: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE documents SET missing = missing + 1 WHERE source = ? AND key = ?",
                (source, key),
            )

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


def _write_text(db: sqlite3.Connection, doc_id: int, generation: int, text: str) -> None:
    """Store ``text`` as the text of version ``generation`` of the document ``doc_id``.

    A big text is inserted as a zeroblob of its UTF-8 length and then written a
    megabyte at a time: bound whole, SQLite would copy it and build its row from the
    copy (twice the text, and the UTF-8 form of a non-ASCII ``str`` besides). Such a
    value is a BLOB of UTF-8 bytes; every reader takes ``CAST(text AS TEXT)``, which
    reads either kind as the same string. Its checksum (``text_key``, which verify
    compares it with) is written with it.
    """
    sql = "INSERT INTO versions (doc_id, generation, text_key, text) VALUES (?, ?, ?, {})"
    if len(text) <= BIG_TEXT:
        db.execute(sql.format("?"), (doc_id, generation, embedding_text_key(text), text))
        return
    pieces = range(0, len(text), _TEXT_PIECE)
    size = len(text) if text.isascii() else sum(
        len(text[i : i + _TEXT_PIECE].encode("utf-8")) for i in pieces)
    key = embedding_text_key_of((text[i : i + _TEXT_PIECE].encode("utf-8") for i in pieces),
                                size)
    # The zeroblob is the row's last column: SQLite then never builds its bytes in memory.
    row = db.execute(sql.format("zeroblob(?)"), (doc_id, generation, key, size)).lastrowid
    assert row is not None
    with db.blobopen("versions", "text", row) as blob:
        for i in pieces:
            blob.write(text[i : i + _TEXT_PIECE].encode("utf-8"))
