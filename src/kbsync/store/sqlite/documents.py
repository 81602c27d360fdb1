"""What SQLite keeps of documents beside the SQL core's tables: full-text rows and big texts.

The core writes a plan's documents (:mod:`kbsync.store.sql.documents`); SQLite's FTS5
table keeps its own copy of each current chunk's text, keyed by the chunk's rowid, so
it follows every change of a document's current chunks or title. A big text is
written into its ``versions`` row and read back a piece at a time, never bound whole.
"""

from __future__ import annotations

import codecs
import sqlite3
from collections.abc import Iterator, Sequence

from kbsync.core.identity import embedding_text_key_of
from kbsync.core.plan import DocumentVersion
from kbsync.crashpoints import crashpoint
from kbsync.store.rows import CURRENT
from kbsync.store.sql.documents import DocumentTables as SqlDocuments
from kbsync.store.sqlite.connection import SqliteBase
from kbsync.store.sqlite.schema import CURRENT_TEXT, FTS_HEADING, fts_heading

__all__ = ["BIG_TEXT", "DocumentTables"]

#: A document text of more characters than this is written through incremental blob I/O.
BIG_TEXT = 1_000_000
_TEXT_PIECE = 1 << 20

# The rowids of the current chunks of a source's documents, restricted to some keys.
_CURRENT_CHUNKS = f"SELECT c.id FROM documents d JOIN chunks c ON {CURRENT} WHERE d.source = ? AND "


class DocumentTables(SqliteBase, SqlDocuments):
    """The full-text rows and kept texts of the SQLite store's documents."""

    def _invalidate(self) -> None:
        self._vectors.clear()

    def _dropping_chunks(self, source: str, keys: Sequence[str]) -> None:
        crashpoint("store.drop_fts")
        # By rowid, one at a time: FTS5 scans its whole table for "rowid IN (SELECT ...)".
        rows = []
        for listed, args in self._dialect.any_of("d.key", keys):
            rows += self._db.execute(f"{_CURRENT_CHUNKS}{listed}", (source, *args)).fetchall()
        self._db.executemany("DELETE FROM chunk_fts WHERE rowid = ?", rows)

    def _chunks_written(self, source: str,
                        versions: Sequence[tuple[str, DocumentVersion]]) -> None:
        # The full-text rows from the texts in hand: selected from a join with chunk_texts
        # and documents, they made a third of a first sync's apply step.
        crashpoint("store.write_fts")
        ids: dict[str, list[int]] = {}
        for listed, args in self._dialect.any_of("d.key", [key for key, _ in versions]):
            for key, row in self._db.execute(
                    f"SELECT d.key, c.id FROM documents d JOIN chunks c ON {CURRENT} "
                    f"WHERE d.source = ? AND {listed} ORDER BY d.key, c.idx", (source, *args)):
                ids.setdefault(key, []).append(row)
        self._db.executemany(
            "INSERT INTO chunk_fts (rowid, text, heading) VALUES (?, ?, ?)",
            [(row, c.text, fts_heading(v.title, c.heading)) for key, v in versions
             for row, c in zip(ids.get(key, ()), v.chunks, strict=False)])

    def _retitled(self, source: str, keys: Sequence[str]) -> None:
        """Give the full-text rows of the documents' current chunks their (maybe new) title."""
        rows = []
        for listed, args in self._dialect.any_of("d.key", keys):
            rows += self._db.execute(f"{_CURRENT_CHUNKS}{listed}", (source, *args)).fetchall()
        self._db.executemany(
            f"UPDATE chunk_fts SET heading = (SELECT {FTS_HEADING} FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id WHERE c.id = chunk_fts.rowid) WHERE rowid = ?",
            rows)

    def _discarding_chunk_texts(self, digests: Sequence[str]) -> None:
        # The full-text rows hold copies of the damaged texts: they go too, and the
        # repair's full-text step fills them again from the restored chunk texts.
        self._db.executemany("DELETE FROM chunk_fts WHERE rowid IN "
                             "(SELECT id FROM chunks WHERE digest = ?)", ((d,) for d in digests))

    def _insert_texts(self, source: str, texts: Sequence[tuple[str, str]]) -> None:
        small = [(key, text) for key, text in texts if len(text) <= BIG_TEXT]
        if small:
            super()._insert_texts(source, small)
        for key, text in texts:
            if len(text) > BIG_TEXT:
                _write_big_text(self._db, source, key, text)

    def text_pieces(self, source: str, key: str) -> Iterator[str]:
        row = self._db.execute(
            f"SELECT t.rowid, typeof(t.text) FROM documents d JOIN versions t ON {CURRENT_TEXT} "
            "WHERE d.source = ? AND d.key = ?", (source, key)).fetchone()
        if row is None:
            return
        if row[1] != "blob":  # a text written whole (see _write_big_text)
            yield self._db.execute("SELECT text FROM versions WHERE rowid = ?",
                                   (row[0],)).fetchone()[0]
            return
        decoder = codecs.getincrementaldecoder("utf-8")()
        with self._db.blobopen("versions", "text", row[0], readonly=True) as blob:
            while piece := blob.read(_TEXT_PIECE):
                yield decoder.decode(piece)
        yield decoder.decode(b"", final=True)


def _write_big_text(db: sqlite3.Connection, source: str, key: str, text: str) -> None:
    """Store ``text`` as the text of the current version of the document at ``key``.

    It is inserted as a zeroblob of its UTF-8 length and then written a megabyte at a
    time: bound whole, SQLite would copy it and build its row from the copy (twice the
    text, and the UTF-8 form of a non-ASCII ``str`` besides). Such a value is a BLOB of
    UTF-8 bytes; every reader takes ``CAST(text AS TEXT)``, which reads either kind as
    the same string. Its checksum (``text_key``, which verify compares it with) is
    written with it.
    """
    pieces = range(0, len(text), _TEXT_PIECE)
    size = len(text) if text.isascii() else sum(
        len(text[i : i + _TEXT_PIECE].encode("utf-8")) for i in pieces)
    checksum = embedding_text_key_of(
        (text[i : i + _TEXT_PIECE].encode("utf-8") for i in pieces), size)
    found = db.execute("SELECT id, generation FROM documents WHERE source = ? AND key = ?",
                       (source, key)).fetchone()
    if found is None:
        return
    # The zeroblob is the row's last value, of VALUES (a SELECT would make it): SQLite then
    # never builds its bytes in memory.
    row = db.execute("INSERT INTO versions (doc_id, generation, text_key, text) "
                     "VALUES (?, ?, ?, zeroblob(?))", (*found, checksum, size)).lastrowid
    assert row is not None
    with db.blobopen("versions", "text", row) as blob:
        for i in pieces:
            blob.write(text[i : i + _TEXT_PIECE].encode("utf-8"))

