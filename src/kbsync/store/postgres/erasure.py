"""What PostgreSQL does besides the SQL core's gc and erase: the work queue forgets an erased
key, and the tables are vacuumed so that no dead row keeps a copy of what was erased."""

from __future__ import annotations

from kbsync.crashpoints import crashpoint
from kbsync.store.postgres.documents import DocumentTables

__all__ = ["ErasureTables"]


class ErasureTables(DocumentTables):
    """The PostgreSQL store's part of :meth:`~kbsync.store.Erasures.erase` and ``gc``."""

    def _erasing(self, source: str, key: str) -> None:
        self._write("DELETE FROM work WHERE key = %s", (key,))

    def _collecting(self) -> None:
        self._write("DELETE FROM work")

    def _compact(self) -> None:
        for table in ("documents", "chunks", "chunk_texts", "texts", "embeddings", "runs"):
            crashpoint("store.vacuum")
            self._conn.execute(f"VACUUM (ANALYZE) {table}")

    def _compact_erased(self) -> None:
        # Rewrite the tables that held the erased text, so no dead row keeps a copy of it.
        for table in ("documents", "texts", "chunks", "chunk_texts", "runs", "work", "outbox"):
            crashpoint("store.vacuum")
            self._conn.execute(f"VACUUM FULL {table}")
