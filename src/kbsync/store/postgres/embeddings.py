"""The embedding cache: vectors by chunk digest and embedder, an HNSW index per dimension."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import numpy.typing as npt

from kbsync.crashpoints import crashpoint
from kbsync.store.postgres.connection import PostgresBase, scalar
from kbsync.store.postgres.schema import HNSW_MAX_DIMENSION
from kbsync.store.rows import CURRENT, DIMENSION_PREFIX, INDEXED, by_text_key

__all__ = ["EmbeddingTables"]


class EmbeddingTables(PostgresBase):
    """The :class:`~kbsync.store.EmbeddingCache` role of the PostgreSQL store."""

    def cached(self, embedder: str, digests: Collection[str]) -> set[str]:
        items = list(digests)
        found: set[str] = set()
        for i in range(0, len(items), 5000):
            found.update(r[0] for r in self._conn.execute(
                "SELECT digest FROM embeddings WHERE embedder = %s AND digest = ANY(%s)",
                (embedder, items[i : i + 5000])))
        return found

    def unembedded(self, source: str, embedder: str) -> dict[str, str]:
        return dict(self._conn.execute(
            f"SELECT DISTINCT c.digest, t.text FROM documents d JOIN chunks c ON {CURRENT} "
            "JOIN chunk_texts t ON t.digest = c.digest LEFT JOIN embeddings e "
            "ON e.digest = c.digest AND e.embedder = %s "
            f"WHERE d.source = %s AND e.digest IS NULL AND {INDEXED}",
            (embedder, source),
        ).fetchall())

    def adopt_by_text(self, embedder: str, text_keys: Mapping[str, bytes], *,
                      write: bool = True) -> set[str]:
        wanting = by_text_key(text_keys)
        keys = list(wanting)
        holders: dict[bytes, str] = {}  # a text's key -> a digest holding its vector
        for i in range(0, len(keys), 5000):
            holders.update((bytes(key), holder) for key, holder in self._conn.execute(
                "SELECT t.text_key, min(t.digest) FROM chunk_texts t JOIN embeddings e "
                "ON e.digest = t.digest AND e.embedder = %s WHERE t.text_key = ANY(%s) "
                "GROUP BY t.text_key", (embedder, keys[i : i + 5000])))
        # Shared rows are inserted in digest order, so concurrent workers never deadlock.
        found = sorted((digest, holder) for key, holder in holders.items()
                       for digest in wanting[key])
        if write and found:
            with self._transaction():
                crashpoint("store.adopt_vectors")
                self._queue(
                    "INSERT INTO embeddings (digest, embedder, dimension, vector) "
                    "SELECT u.digest, e.embedder, e.dimension, e.vector FROM "
                    "unnest(%s::text[], %s::text[]) AS u (digest, holder) JOIN embeddings e "
                    "ON e.digest = u.holder AND e.embedder = %s ORDER BY u.digest "
                    "ON CONFLICT DO NOTHING",
                    ([d for d, _ in found], [h for _, h in found], embedder))
        return {digest for digest, _ in found}

    def put_vectors(self, embedder: str,
                    vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if vectors:
            with self._transaction():
                self._insert_vectors(embedder, vectors)

    def _insert_vectors(self, embedder: str,
                        vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if not vectors:
            return
        rows = [(d, embedder, int(v.shape[0]), np.asarray(v, dtype=np.float32))
                for d, v in sorted(vectors.items())]
        for dimension in {r[2] for r in rows}:
            self._ensure_index(dimension)
        crashpoint("store.write_vectors")
        # One statement per vector, but pipelined (executemany in a pipeline waits once).
        cur = self._conn.cursor()
        cur.executemany("INSERT INTO embeddings (digest, embedder, dimension, vector) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", rows)
        self._queued.append(cur)
        for dimension in sorted({r[2] for r in rows}):
            self._queue("INSERT INTO meta (name, value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                        (DIMENSION_PREFIX + embedder, str(dimension)))

    def prepare_vectors(self, dimension: int) -> None:
        """Before workers insert vectors of ``dimension``: make its index, or defer it.

        Building an HNSW index over vectors already loaded is several times cheaper
        than growing it one insert at a time, so when there are no vectors of that
        dimension yet (a first sync) the index is deferred to :meth:`finish_vectors`,
        and every process inserting meanwhile sees the deferral in ``meta``.
        """
        if dimension in self._indexed_dimensions or dimension > HNSW_MAX_DIMENSION:
            return
        if scalar(self._conn, "SELECT count(*) FROM (SELECT 1 FROM embeddings "
                               "WHERE dimension = %s LIMIT 1) x", (dimension,)):
            self._ensure_index(dimension)
        else:
            self.set_meta(f"index_deferred:{dimension}", "1")

    def finish_vectors(self, dimension: int) -> None:
        """Build a deferred index of ``dimension`` (after the workers are done)."""
        if self.get_meta(f"index_deferred:{dimension}") is not None:
            self._ensure_index(dimension, deferred=False)
            crashpoint("store.set_meta")
            self._write("DELETE FROM meta WHERE name = %s", (f"index_deferred:{dimension}",))

    def _ensure_index(self, dimension: int, *, deferred: bool | None = None) -> None:
        """The HNSW index of one dimension, made when its first vectors arrive (unless a
        parallel first sync deferred it)."""
        if dimension in self._indexed_dimensions or dimension > HNSW_MAX_DIMENSION:
            return
        if deferred is None:
            deferred = dimension in self._deferred_dimensions or self.get_meta(
                f"index_deferred:{dimension}") is not None
        if deferred:
            self._deferred_dimensions.add(dimension)
            return
        with self._transaction():
            crashpoint("store.create_index")
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('kbsync:index'))")
            if self.index_memory is not None:
                self._conn.execute("SELECT set_config('maintenance_work_mem', %s, true)",
                                   (self.index_memory,))
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS embeddings_hnsw_{dimension} ON embeddings "
                f"USING hnsw ((vector::vector({dimension})) vector_ip_ops) "
                f"WHERE dimension = {dimension}")
        self._indexed_dimensions.add(dimension)

    def vectors(self, embedder: str,
                digests: Collection[str]) -> dict[str, npt.NDArray[np.float32]]:
        items = list(digests)
        found: dict[str, npt.NDArray[np.float32]] = {}
        for i in range(0, len(items), 5000):
            for dig, vector in self._conn.execute(
                "SELECT digest, vector FROM embeddings WHERE embedder = %s AND digest = ANY(%s)",
                (embedder, items[i : i + 5000])):
                found[dig] = np.asarray(vector.to_numpy(), dtype=np.float32)
        return found

    def embedder_dimensions(self) -> dict[str, int]:
        return {r[0][len(DIMENSION_PREFIX):]: int(r[1]) for r in self._conn.execute(
            "SELECT name, value FROM meta WHERE starts_with(name, %s)", (DIMENSION_PREFIX,))}
