"""The embedding cache's vector indexes: an HNSW index per dimension, made as its vectors arrive."""

from __future__ import annotations

from collections.abc import Collection

from kbsync.crashpoints import crashpoint
from kbsync.store.postgres.connection import PostgresBase, scalar
from kbsync.store.postgres.schema import HNSW_MAX_DIMENSION
from kbsync.store.sql.records import RecordTables

__all__ = ["VectorIndexes"]


class VectorIndexes(PostgresBase, RecordTables):
    """The HNSW index of each dimension of the embedding cache (the SQL core's
    :mod:`~kbsync.store.sql.embeddings`)."""

    def _vectors_arriving(self, dimensions: Collection[int]) -> None:
        for dimension in dimensions:
            self._ensure_index(dimension)

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
