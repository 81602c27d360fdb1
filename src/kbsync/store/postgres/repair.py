"""Status, verification and damage checks of the PostgreSQL store."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace

from kbsync.core.identity import embedding_text_key
from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import StoreStatus, invariants
from kbsync.store.postgres.checks import ValueChecks
from kbsync.store.postgres.connection import load_psycopg, scalar, shown
from kbsync.store.postgres.indexes import DeferredIndexes
from kbsync.store.postgres.schema import HNSW_MAX_DIMENSION
from kbsync.store.sql.digests import DigestCounts, drift_lines
from kbsync.store.sql.status import store_status
from kbsync.store.values import lines, summary

__all__ = ["RepairTables"]


class RepairTables(DeferredIndexes, ValueChecks, DigestCounts):
    """The :class:`~kbsync.store.Maintenance` role of the PostgreSQL store."""

    def status(self) -> StoreStatus:
        """The SQL core's counts, and how a vector search of each dimension answers."""
        return replace(store_status(self._dialect), vector_search=tuple(self._vector_search()))

    def _writing(self) -> bool:
        """Whether a writer (a sync) holds the lock now: one that has crossed ``ann_above``
        builds the index at its end, so its absence meanwhile is no problem."""
        return self.lock(wait=False).holder() is not None

    def _unindexed_dimensions(self) -> list[tuple[int, int]]:
        """The dimensions (and their counts of vectors) past ``ann_above`` with no index."""
        return [(int(d), int(n)) for d, n in self._conn.execute(
            "SELECT dimension, count(*) FROM embeddings GROUP BY dimension ORDER BY 1")
            if self.needs_vector_index(int(d))]

    def _vector_search(self) -> list[str]:
        """How a vector search of each dimension answers: its HNSW index, or a scan."""
        said = []
        for dimension, count in self._conn.execute(
                "SELECT dimension, count(*) FROM embeddings GROUP BY dimension ORDER BY 1"):
            vectors = f"{count:,} vectors of {dimension} dimensions"
            if self._has_index(f"embeddings_hnsw_{dimension}"):
                said.append(f"{vectors}: HNSW index")
            elif dimension > HNSW_MAX_DIMENSION or not self.ann_above:
                said.append(f"{vectors}: exact search (no index: "
                            f"{'too many dimensions' if self.ann_above else 'ann_above = 0'})")
            elif count > self.ann_above:
                said.append(f"{vectors}: exact search; the index (above ann_above = "
                            f"{self.ann_above:,}) is built at the end of the next sync")
            else:
                said.append(f"{vectors}: exact search (the index is built at the end of "
                            f"the sync that takes them past ann_above = {self.ann_above:,})")
        return said

    def verify(self, embedder: str, identity: Callable[[str], str] | None,
               derivations: Collection[str] | None = None,
               norm: VectorNorm | None = None) -> list[str]:
        damage = self.damage()
        problems = invariants.problems(
            self._stream, embedder, mark="%s",
            bad_vectors="SELECT count(*) FROM embeddings WHERE vector_dims(vector) != dimension")
        problems += drift_lines(self.digest_drift())
        problems += [f"{shown(self.url)}: {count:,} vectors of {dimension} dimensions, above "
                     f"ann_above = {self.ann_above:,}, have no HNSW index (a sync that crossed "
                     "it stopped before its end), so vector searches compare them all; the "
                     "next sync builds it at its end, as `kbsync verify --repair` does"
                     for dimension, count in self._unindexed_dimensions()
                     if not self._writing()]
        values = self._value_damage(embedder, identity, derivations, norm)
        if damage or values:
            self.remember_damage("; ".join(
                [*(["verify found damaged indexes"] if damage else []),
                 *([summary(values)] if values else [])]))
        elif self.known_damage() is not None:
            self.remember_damage(None)  # sound now (repaired, or restored)
        return damage + problems + lines(values, norm or ANY_NORM)

    def check_pages(self) -> str | None:
        """None: the server checks its own pages (checksums, amcheck), not a client's sync."""
        return None

    def repair(self, rechunk: Callable[[str], Mapping[str, str]]) -> list[str]:
        """Restore the chunk texts that are missing (a damaged one discarded), cut again
        from their document's current or previous text (``rechunk`` maps a text to the
        digests and texts of its chunks), and count the digests again if the kept counts
        have drifted; what was done, as lines for a person.

        The rest of what SQLite's repair rebuilds is the server's own: its indexes are
        mended with REINDEX, and full text is a column of each chunk text's row.
        """
        missing = self._conn.execute(
            "SELECT c.doc_id, array_agg(DISTINCT c.digest) FROM chunks c LEFT JOIN chunk_texts t "
            "ON t.digest = c.digest WHERE t.digest IS NULL GROUP BY c.doc_id").fetchall()
        restored = 0
        for doc_id, digests in missing:
            row = self._conn.execute("SELECT text, previous FROM texts WHERE doc_id = %s",
                                     (doc_id,)).fetchone()
            cut = {d: t for text in (row or ()) if text is not None
                   for d, t in rechunk(text).items()}
            found = sorted((d, cut[d]) for d in digests if d in cut)
            with self._transaction():
                self._write_many("INSERT INTO chunk_texts (digest, text, text_key) "
                                 "VALUES (%s, %s, %s) ON CONFLICT (digest) DO NOTHING",
                                 [(d, t, embedding_text_key(t)) for d, t in found])
            restored += len(found)
        done = [f"rebuilt the chunk texts ({restored} restored from the documents' text)"
                ] if restored else []
        for dimension, count in self._unindexed_dimensions():
            self._build(str(dimension))
            done.append(f"built the HNSW index of the {count:,} vectors of {dimension} "
                        "dimensions")
        differ = self.recount_drifted()
        return done + ([f"rebuilt the digest counts ({differ} differed from a recount)"]
                       if differ else [])

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
