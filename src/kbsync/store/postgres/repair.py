"""Status, verification and damage checks of the PostgreSQL store."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection

from kbsync.store import StoreStatus, invariants
from kbsync.store.postgres.connection import PostgresBase, load_psycopg, scalar, shown
from kbsync.store.rows import CURRENT

__all__ = ["RepairTables"]


class RepairTables(PostgresBase):
    """The :class:`~kbsync.store.Maintenance` role of the PostgreSQL store."""

    def status(self) -> StoreStatus:
        db = self._conn
        by_source = {r[0]: int(r[1]) for r in db.execute(
            "SELECT source, count(*) FROM documents GROUP BY source")}
        last = db.execute("SELECT report FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return StoreStatus(
            documents=sum(by_source.values()),
            chunks=int(scalar(db,
                f"SELECT count(*) FROM chunks c JOIN documents d ON {CURRENT}")),
            embeddings=int(scalar(db, "SELECT count(*) FROM embeddings")),
            runs=int(scalar(db, "SELECT count(*) FROM runs")),
            by_source=by_source,
            last_run=json.loads(last[0]) if last else None,
        )

    def verify(self, embedder: str, identity: Callable[[str], str] | None,
               derivations: Collection[str] | None = None) -> list[str]:
        return self.damage() + invariants.problems(
            self._conn.execute, embedder, identity, mark="%s", derivations=derivations,
            bad_vectors="SELECT count(*) FROM embeddings WHERE vector_dims(vector) != dimension")

    def damage(self) -> list[str]:
        """What ``amcheck``'s ``bt_index_check`` finds wrong with kbsync's b-tree indexes.

        Where the extension cannot be created (no rights, not installed), that check
        is left out. Either way the unique indexes' promise is checked from the
        tables' side too: no key occurs twice when the rows are read without an index.
        """
        driver, _ = load_psycopg()
        found = self._heap_duplicates()
        try:
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        except driver.Error:
            return found
        for (index,) in self._conn.execute(
                "SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = "
                "i.indexrelid JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'btree' AND "
                "c.relnamespace = current_schema()::regnamespace AND c.relpersistence != 't' "
                "ORDER BY 1").fetchall():
            try:
                self._conn.execute("SELECT bt_index_check(%s::regclass)", (index,))
            except driver.Error as exc:
                found.append(f"{shown(self.url)}: index {index} is damaged "
                             f"({' '.join(str(exc).split())}); run REINDEX INDEX {index}, "
                             "then `kbsync verify`")
        return found

    def _heap_duplicates(self) -> list[str]:
        """Keys of the unique indexes that occur twice among the rows themselves."""
        found = []
        with self._transaction():
            for setting in ("enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan"):
                self._conn.execute(f"SET LOCAL {setting} = off")  # read the rows, not an index
            for table, key in (("documents", "source, key"), ("chunks", "doc_id, generation, idx"),
                               ("chunk_texts", "digest"), ("embeddings", "digest, embedder"),
                               ("texts", "doc_id")):
                twice = int(scalar(self._conn, f"SELECT count(*) FROM (SELECT 1 FROM {table} "
                                                f"GROUP BY {key} HAVING count(*) > 1) d"))
                if twice:
                    found.append(f"{shown(self.url)}: {twice} keys occur twice in {table}, so "
                                 f"its unique index is damaged; run REINDEX TABLE {table}, "
                                 "remove the duplicates, then `kbsync verify`")
        return found
