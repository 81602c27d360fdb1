"""Erasure and garbage collection: what is erased leaves no byte behind."""

from __future__ import annotations

import json
import sqlite3

from kbsync.crashpoints import crashpoint
from kbsync.store.guard import store_error
from kbsync.store.rows import DIMENSION_PREFIX, erased
from kbsync.store.sqlite.documents import DocumentTables
from kbsync.store.sqlite.schema import DIMENSIONS

__all__ = ["ErasureTables"]


class ErasureTables(DocumentTables):
    """The :class:`~kbsync.store.Erasures` role and gc of the SQLite store."""

    def add_erasure(self, pattern: str, created: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO erasures (pattern, created) VALUES (?, ?) "
                       "ON CONFLICT (pattern) DO NOTHING", (pattern, created))

    def erasures(self) -> list[tuple[str, str]]:
        return [(str(r[0]), str(r[1])) for r in self._db.execute(
            "SELECT pattern, created FROM erasures ORDER BY pattern")]

    def remove_erasure(self, pattern: str) -> bool:
        with self._transaction() as db:
            return db.execute("DELETE FROM erasures WHERE pattern = ?", (pattern,)).rowcount > 0

    def erase(self, pattern: str) -> list[tuple[str, str]]:
        gone = erased(self._db.execute("SELECT source, key FROM documents").fetchall(), pattern)
        for source, key in gone:
            with self._transaction() as db:
                digests = [r[0] for r in db.execute(
                    "SELECT DISTINCT c.digest FROM documents d JOIN chunks c ON c.doc_id = d.id "
                    "WHERE d.source = ? AND d.key = ?", (source, key))]
                self._delete(source, key)
                self._scrub_runs(key)
                self._drop_unreferenced(digests)
        self._vectors.clear()
        # Even when nothing matched: a rerun of an interrupted erase finishes its scrub.
        self.gc()
        return gone

    def _drop_unreferenced(self, digests: list[str]) -> None:
        """Texts and vectors of ``digests`` that no chunk refers to any more."""
        for i in range(0, len(digests), 500):
            batch = digests[i : i + 500]
            marks = ",".join("?" * len(batch))
            for table in ("chunk_texts", "embeddings"):
                crashpoint("store.erase_derived")
                self._db.execute(
                    f"DELETE FROM {table} WHERE digest IN ({marks}) "
                    "AND digest NOT IN (SELECT digest FROM chunks)", batch)

    def _scrub_runs(self, key: str) -> None:
        """Erasure covers run reports too: the erased key is replaced wherever it appears."""
        quoted = json.dumps(key)
        for run_id, report in self._db.execute(
            "SELECT id, report FROM runs WHERE instr(report, ?) > 0", (quoted,)
        ).fetchall():
            crashpoint("store.scrub_run")
            self._db.execute("UPDATE runs SET report = ? WHERE id = ?",
                             (report.replace(quoted, '"[erased]"'), run_id))

    def gc(self) -> dict[str, int]:
        db = self._db
        with self._transaction():
            texts = db.execute(
                "DELETE FROM chunk_texts WHERE digest NOT IN (SELECT digest FROM chunks)"
            ).rowcount
            crashpoint("store.gc_vectors")
            vectors = db.execute(
                "DELETE FROM embeddings WHERE digest NOT IN (SELECT digest FROM chunks)"
            ).rowcount
            db.execute(f"DELETE FROM meta WHERE {DIMENSIONS} AND substr(name, "
                       f"{len(DIMENSION_PREFIX) + 1}) NOT IN (SELECT embedder FROM embeddings)")
        self._vectors.clear()
        # Deleted rows can live on in full-text segments, free pages and the WAL: merge
        # the segments, rewrite the file and empty the WAL so no byte of them is left.
        for point, sql in (("store.fts_optimize", "INSERT INTO chunk_fts (chunk_fts) "
                                                  "VALUES ('optimize')"),
                           ("store.vacuum", "VACUUM"),
                           ("store.checkpoint", "PRAGMA wal_checkpoint(TRUNCATE)")):
            try:
                crashpoint(point)
                db.execute(sql)
            except (sqlite3.Error, OSError) as exc:
                raise store_error(str(self.path), exc, "cannot compact the store") from exc
        return {"chunk_texts": texts, "embeddings": vectors}
