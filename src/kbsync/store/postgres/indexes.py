"""The indexes a first load builds after it instead of row by row: the HNSW index of each
dimension of the embedding cache and the GIN index of the chunk texts' full text.

Building an HNSW graph over vectors already loaded is several times cheaper than growing
it one insert at a time, and a GIN index built in one sort is cheaper than one whose
entries arrive with every row. So when a sync loads into a store that holds no vectors of
its dimension (or no chunk text, for full text), :meth:`~DeferredIndexes.prepare_vectors`
drops or skips the index and notes it in ``meta``; every process writing meanwhile (a
parallel sync's workers) sees the note and grows none; :meth:`~DeferredIndexes.finish_vectors`
builds them once at the end, with room (``maintenance_work_mem``) and the server's parallel
maintenance workers, and removes the notes with the same commit. After that the indexes
grow with each write, as any index does. A sync that dies before its end leaves the notes:
searches answer by a scan meanwhile, and the next sync, finding them, builds the indexes
at its end.
"""

from __future__ import annotations

from collections.abc import Collection

from kbsync.crashpoints import crashpoint
from kbsync.store.postgres.connection import PostgresBase, load_psycopg, scalar
from kbsync.store.postgres.schema import HNSW_MAX_DIMENSION
from kbsync.store.sql.records import RecordTables

__all__ = ["DEFERRED_PREFIX", "DeferredIndexes"]

DEFERRED_PREFIX = "index_deferred:"
"""Prefix of the meta entries of the indexes deferred to the end of a load: the vector
index of a dimension (``index_deferred:256``) and the full-text index (``…:text``)."""

_TEXT = "text"

# How much memory an index build may take at most when the store is not told
# (``index_memory``): enough for the HNSW graph of about 600,000 vectors of 384 dimensions.
# A parallel HNSW build takes all of it as shared memory at once, so it is no more than the
# build needs.
_BUILD_MEMORY_CAP_KB = 1 << 20


class DeferredIndexes(PostgresBase, RecordTables):
    """The HNSW index of each dimension and the full-text index, deferred on a first load."""

    def _vectors_arriving(self, dimensions: Collection[int]) -> None:
        for dimension in dimensions:
            self._ensure_index(dimension)

    def prepare_vectors(self, dimension: int) -> None:
        """Before a sync loads chunk texts and vectors of ``dimension``: defer the index of
        each that the store holds none of yet (a first load), or make one found missing.

        Indexes deferred by a sync that did not end stay deferred, to the end of this one.
        """
        deferred = self._deferred()
        if _TEXT not in deferred:
            if not scalar(self._conn, "SELECT EXISTS (SELECT 1 FROM chunk_texts)"):
                with self._transaction():
                    crashpoint("store.defer_index")
                    self._defer(_TEXT)
                    self._conn.execute("DROP INDEX IF EXISTS chunk_texts_tsv")
            elif not self._has_index("chunk_texts_tsv"):
                self._build(_TEXT)
        if dimension in self._indexed_dimensions or dimension > HNSW_MAX_DIMENSION:
            return
        if str(dimension) in deferred:
            self._deferred_dimensions.add(dimension)
        elif scalar(self._conn, "SELECT EXISTS (SELECT 1 FROM embeddings WHERE dimension = %s)",
                    (dimension,)):
            self._ensure_index(dimension)
        else:
            with self._transaction():
                crashpoint("store.defer_index")
                self._defer(str(dimension))
            self._deferred_dimensions.add(dimension)

    def finish_vectors(self, dimension: int) -> None:
        """Build every deferred index (after a load: a coordinator once its workers are done),
        each in a transaction that also removes its note."""
        for name in sorted(self._deferred()):
            self._build(name)
        self._deferred_dimensions.clear()

    def _deferred(self) -> set[str]:
        """The names of the deferred indexes (``text``, or a dimension)."""
        return {str(r[0])[len(DEFERRED_PREFIX):] for r in self._conn.execute(
            "SELECT name FROM meta WHERE starts_with(name, %s)", (DEFERRED_PREFIX,))}

    def _defer(self, name: str) -> None:
        self._conn.execute("INSERT INTO meta (name, value) VALUES (%s, '1') "
                           "ON CONFLICT (name) DO NOTHING", (DEFERRED_PREFIX + name,))

    def _has_index(self, name: str) -> bool:
        return bool(scalar(self._conn, "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE "
                                       "schemaname = current_schema() AND indexname = %s)",
                           (name,)))

    def _ensure_index(self, dimension: int) -> None:
        """The HNSW index of one dimension, made when its first vectors arrive, unless a
        load deferred it (then it is built at the load's end)."""
        if dimension in self._indexed_dimensions or dimension > HNSW_MAX_DIMENSION:
            return
        if dimension in self._deferred_dimensions or str(dimension) in self._deferred():
            self._deferred_dimensions.add(dimension)
            return
        self._build(str(dimension))

    def _build(self, name: str) -> None:
        """Build a deferred (or missing) index and remove its note, in one transaction; in
        parallel where the server allows, else (its shared memory too small) alone."""
        driver, _ = load_psycopg()
        try:
            self._build_once(name, parallel=True)
        except driver.Error as exc:
            # A server in a container may have less shared memory than a parallel HNSW
            # build asks for (all of maintenance_work_mem); inside a transaction of the
            # caller's (vectors of a new dimension arriving) the error is the caller's.
            if "shared memory" not in str(exc) or self._depth:
                raise
            self._build_once(name, parallel=False)

    def _build_once(self, name: str, *, parallel: bool) -> None:
        with self._transaction():
            crashpoint("store.create_index")
            # One build at a time: workers that find no note make the index of a new
            # dimension when their first vectors arrive.
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('kbsync:index'))")
            self._conn.execute("SELECT set_config('maintenance_work_mem', %s, true)",
                               (self._build_memory(name),))
            self._conn.execute(
                "SELECT set_config('max_parallel_maintenance_workers', %s, true)",
                ("0" if not parallel else
                 str(scalar(self._conn, "SELECT current_setting('max_parallel_workers')")),))
            if name == _TEXT:
                self._conn.execute("CREATE INDEX IF NOT EXISTS chunk_texts_tsv ON chunk_texts "
                                   "USING gin (tsv)")
            else:
                dimension = int(name)
                self._conn.execute(
                    f"CREATE INDEX IF NOT EXISTS embeddings_hnsw_{dimension} ON embeddings "
                    f"USING hnsw ((vector::vector({dimension})) vector_ip_ops) "
                    f"WHERE dimension = {dimension}")
            crashpoint("store.set_meta")
            self._conn.execute("DELETE FROM meta WHERE name = %s", (DEFERRED_PREFIX + name,))
        if name != _TEXT:
            self._indexed_dimensions.add(int(name))
            self._deferred_dimensions.discard(int(name))

    def _build_memory(self, name: str) -> str:
        """The ``maintenance_work_mem`` of building an index: ``index_memory`` when told,
        else the server's, raised to what the build needs (up to a gigabyte)."""
        if self.index_memory is not None:
            return self.index_memory
        current = int(scalar(self._conn, "SELECT setting::bigint FROM pg_settings "
                                         "WHERE name = 'maintenance_work_mem'"))
        if name == _TEXT:  # a GIN build sorts its entries: about the size of the texts
            needed = int(scalar(self._conn, "SELECT pg_table_size('chunk_texts')")) // 1024
        else:  # an HNSW graph: each vector and its neighbours
            dimension = int(name)
            rows = int(scalar(self._conn, "SELECT count(*) FROM embeddings WHERE dimension = %s",
                              (dimension,)))
            needed = rows * (4 * dimension + 512) * 5 // 4 // 1024
        return f"{max(current, min(needed, _BUILD_MEMORY_CAP_KB))}kB"
