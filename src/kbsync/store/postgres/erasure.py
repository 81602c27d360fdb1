"""Erasure and garbage collection: what is erased leaves no row behind."""

from __future__ import annotations

import json

from kbsync.crashpoints import crashpoint
from kbsync.store.postgres.documents import DocumentTables
from kbsync.store.rows import DIMENSION_PREFIX, erased

__all__ = ["ErasureTables"]


class ErasureTables(DocumentTables):
    """The :class:`~kbsync.store.Erasures` role and gc of the PostgreSQL store."""

    def add_erasure(self, pattern: str, created: str) -> None:
        with self._transaction():
            crashpoint("store.add_erasure")
            self._write("INSERT INTO erasures (pattern, created) VALUES (%s, %s) "
                        "ON CONFLICT (pattern) DO NOTHING", (pattern, created))

    def erasures(self) -> list[tuple[str, str]]:
        return [(str(r[0]), str(r[1])) for r in self._conn.execute(
            "SELECT pattern, created FROM erasures ORDER BY pattern COLLATE \"C\"")]

    def remove_erasure(self, pattern: str) -> bool:
        with self._transaction():
            crashpoint("store.remove_erasure")
            return self._write("DELETE FROM erasures WHERE pattern = %s", (pattern,)) > 0

    def erase(self, pattern: str) -> list[tuple[str, str]]:
        gone = erased(self._conn.execute("SELECT source, key FROM documents ORDER BY id"),
                      pattern)
        for source, key in gone:
            with self._transaction():
                self._delete(source, key)
                self._scrub_runs(key)
        # Even when nothing matched: a rerun of an erase killed after its documents'
        # transactions finishes the scrub (their texts and vectors, their dead rows).
        self.gc()
        # Rewrite the tables that held the erased text, so no dead row keeps a copy of it.
        for table in ("documents", "texts", "chunks", "chunk_texts", "runs", "work", "outbox"):
            crashpoint("store.vacuum")
            self._conn.execute(f"VACUUM FULL {table}")
        return gone

    def _scrub_runs(self, key: str) -> None:
        """Erasure covers run reports too: the erased key is replaced wherever it appears."""
        quoted = json.dumps(key)
        crashpoint("store.scrub_run")
        self._write("UPDATE runs SET report = replace(report, %s, '\"[erased]\"') "
                    "WHERE strpos(report, %s) > 0", (quoted, quoted))
        self._write("DELETE FROM work WHERE key = %s", (key,))

    def gc(self) -> dict[str, int]:
        with self._transaction():
            texts = self._write(
                "DELETE FROM chunk_texts t WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks c WHERE c.digest = t.digest)")
            crashpoint("store.gc_vectors")
            vectors = self._write(
                "DELETE FROM embeddings e WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks c WHERE c.digest = e.digest)")
            self._write("DELETE FROM meta m WHERE starts_with(m.name, %s) AND NOT EXISTS "
                        "(SELECT 1 FROM embeddings e WHERE e.embedder = substr(m.name, %s))",
                        (DIMENSION_PREFIX, len(DIMENSION_PREFIX) + 1))
            self._write("DELETE FROM work")
        for table in ("documents", "chunks", "chunk_texts", "texts", "embeddings", "runs"):
            crashpoint("store.vacuum")
            self._conn.execute(f"VACUUM (ANALYZE) {table}")
        return {"chunk_texts": texts, "embeddings": vectors}
