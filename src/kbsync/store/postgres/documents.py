"""What PostgreSQL keeps of documents its own way: both kept texts in one ``texts`` row, and one
stored document read whole for a worker."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import StoredDocument
from kbsync.store import DocumentText
from kbsync.store.postgres.indexes import DeferredIndexes
from kbsync.store.rows import CURRENT, MANIFEST_COLUMNS, document_text, stored_document
from kbsync.store.sql.dialect import Column
from kbsync.store.sql.documents import DocumentTables as SqlDocuments

__all__ = ["DocumentTables"]

_TEXT_COLUMNS: tuple[Column, ...] = (("key", "text"), ("text", "text"), ("text_key", "bytea"))


class DocumentTables(DeferredIndexes, SqlDocuments):
    """The kept texts of the PostgreSQL store's documents: the current and the previous one
    in a row of ``texts``."""

    def stored(self, source: str, key: str) -> StoredDocument | None:
        """One stored document with its chunk digests (what a worker plans against)."""
        row = self._conn.execute(
            f"SELECT {MANIFEST_COLUMNS}, ARRAY(SELECT c.digest FROM chunks c WHERE {CURRENT} "
            "ORDER BY c.idx) FROM documents d WHERE source = %s AND key = %s",
            (source, key)).fetchone()
        if row is None:
            return None
        return replace(stored_document(row), chunk_digests=tuple(row[-1]))

    def _write_texts(self, source: str, texts: Sequence[tuple[str, str]],
                     known: Sequence[str]) -> None:
        # The text before becomes the previous one; its checksum, which verify compares
        # it with, moves along with it.
        self._dialect.insert(
            "texts", _TEXT_COLUMNS, [(k, t, embedding_text_key(t)) for k, t in texts],
            conflict="ON CONFLICT (doc_id) DO UPDATE SET previous = texts.text, "
            "previous_key = texts.text_key, text = excluded.text, text_key = excluded.text_key",
            source=source, document=(("doc_id", "id"),))

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
               "m.moved_from, m.moved, d.metadata FROM documents d JOIN texts t ON t.doc_id = d.id "
               "LEFT JOIN moves m ON m.doc_id = d.id WHERE d.key = %s")
        args: tuple[str, ...] = (key,)
        if source is not None:
            sql += " AND d.source = %s"
            args = (key, source)
        row = self._conn.execute(sql + " ORDER BY d.id LIMIT 1", args).fetchone()
        return None if row is None else document_text(row)
