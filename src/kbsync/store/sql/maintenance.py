"""Counting, collecting and erasing, written once over a dialect; a backend compacts its own way."""

from __future__ import annotations

import json

from kbsync.crashpoints import crashpoint
from kbsync.store import StoreStatus
from kbsync.store.rows import DIMENSION_PREFIX, erased
from kbsync.store.sql.documents import DocumentTables
from kbsync.store.sql.records import RecordTables
from kbsync.store.sql.status import store_status

__all__ = ["DAMAGE_META", "MaintenanceTables"]

DAMAGE_META = "damage"
"""The meta entry that remembers why the store is known to be damaged, where the backend
keeps it no other way."""


class MaintenanceTables(RecordTables, DocumentTables):
    """:meth:`~kbsync.store.Maintenance.status`, ``gc`` and
    :meth:`~kbsync.store.Erasures.erase`, and a known damage kept in meta."""

    def status(self) -> StoreStatus:
        return store_status(self._dialect)

    def gc(self) -> dict[str, int]:
        """Drop the chunk texts and vectors no chunk refers to, and the dimensions of
        embedders left without a vector; then compact (see :meth:`_compact`)."""
        sql = self._dialect
        with self._transaction():
            texts = sql.write("DELETE FROM chunk_texts WHERE NOT EXISTS "
                              "(SELECT 1 FROM chunks c WHERE c.digest = chunk_texts.digest)")
            crashpoint("store.gc_vectors")
            vectors = sql.write("DELETE FROM embeddings WHERE NOT EXISTS "
                                "(SELECT 1 FROM chunks c WHERE c.digest = embeddings.digest)")
            named, args = sql.starts_with("name", DIMENSION_PREFIX)
            sql.write(f"DELETE FROM meta WHERE {named} AND NOT EXISTS (SELECT 1 FROM "
                      "embeddings e WHERE e.embedder = substr(meta.name, ?))",
                      (*args, len(DIMENSION_PREFIX) + 1))
            self._collecting()
        self._invalidate()
        self._compact()
        return {"chunk_texts": texts, "embeddings": vectors}

    def _collecting(self) -> None:
        """More to collect, in the collection's transaction (a backend's own tables)."""

    def erase(self, pattern: str) -> list[tuple[str, str]]:
        sql = self._dialect
        gone = erased(sql.rows("SELECT source, key FROM documents ORDER BY id"), pattern)
        for source, key in gone:
            with self._transaction():
                digests = sorted(r[0] for r in sql.rows(
                    "SELECT DISTINCT c.digest FROM documents d JOIN chunks c ON c.doc_id = d.id "
                    "WHERE d.source = ? AND d.key = ?", (source, key)))
                self._deletes(source, [key])
                crashpoint("store.scrub_run")
                # Erasure covers run reports too: the key is replaced wherever it appears.
                quoted = json.dumps(key)
                sql.write("UPDATE runs SET report = replace(report, ?, '\"[erased]\"') "
                          f"WHERE {sql.contains('report')}", (quoted, quoted))
                self._erasing(source, key)
                # Its texts and vectors go with it, unless another document has them.
                for listed, args in sql.any_of("digest", digests):
                    for table in ("chunk_texts", "embeddings"):
                        crashpoint("store.erase_derived")
                        sql.write(f"DELETE FROM {table} WHERE {listed} AND NOT EXISTS (SELECT "
                                  f"1 FROM chunks c WHERE c.digest = {table}.digest)", args)
        self._invalidate()
        # Even when nothing matched: a rerun of an erase killed after its documents'
        # transactions finishes the scrub (their texts and vectors, their dead rows).
        self.gc()
        self._compact_erased()
        return gone

    def known_damage(self) -> str | None:
        return self.get_meta(DAMAGE_META)

    def remember_damage(self, reason: str | None) -> None:
        self.set_meta(DAMAGE_META, "" if reason is None else " ".join(reason.split()))
