"""The indexes a sync builds at its end instead of row by row: the HNSW index of each
dimension of the embedding cache that has grown past ``ann_above`` vectors, and the GIN
index of the chunk texts' full text after a first load.

Below ``ann_above`` vectors of a dimension (100,000 by default) a vector search compares
the query with every one of them, exactly, in about as long as a search of the index takes
the client to notice, and no graph is built: building it was a third of a first load. The
sync that takes a dimension past the threshold builds its index once, at its end
(:meth:`~DeferredIndexes.finish_vectors`, in every driver: a parallel sync's coordinator
once its workers are done), with room (``maintenance_work_mem``) and the server's parallel
maintenance workers; no process builds one while vectors arrive. Building an HNSW graph
over vectors already loaded is several times cheaper than growing it one insert at a time.
After that the index grows with each write, as any index does, and it is never dropped:
a dimension that shrinks below the threshold keeps it. A sync that dies before its end
builds nothing; searches scan meanwhile, and the next sync builds the index at its end.

A GIN index built in one sort is cheaper than one whose entries arrive with every row, so
when a sync loads into a store that holds no chunk text, :meth:`~DeferredIndexes.prepare_vectors`
drops it and notes that in ``meta``; :meth:`~DeferredIndexes.finish_vectors` builds it and
removes the note with the same commit. A sync that dies before its end leaves the note,
and the next sync, finding it, builds the index at its end.
"""

from __future__ import annotations

from kbsync.crashpoints import crashpoint
from kbsync.store.postgres.connection import PostgresBase, load_psycopg, scalar
from kbsync.store.postgres.schema import HNSW_MAX_DIMENSION
from kbsync.store.sql.records import RecordTables

__all__ = ["DEFERRED_PREFIX", "DeferredIndexes"]

DEFERRED_PREFIX = "index_deferred:"
"""Prefix of the meta entries of the indexes deferred to the end of a load: the full-text
index (``index_deferred:text``), and, written by earlier versions, the vector index of a
dimension (``…:256``)."""

_TEXT = "text"

# How much memory an index build may take at most when the store is not told
# (``index_memory``): enough for the HNSW graph of about 600,000 vectors of 384 dimensions.
# A parallel HNSW build takes all of it as shared memory at once, so it is no more than the
# build needs.
_BUILD_MEMORY_CAP_KB = 1 << 20


class DeferredIndexes(PostgresBase, RecordTables):
    """The HNSW index of each dimension above ``ann_above`` vectors, and the full-text
    index, built at the end of the sync that needs them."""

    def prepare_vectors(self, dimension: int) -> None:
        """Before a sync loads chunk texts and vectors of ``dimension``: defer the full-text
        index if the store holds no chunk text yet (a first load), or make it if found
        missing. No vector index is made before or during a load (see :meth:`finish_vectors`).

        Indexes deferred by a sync that did not end stay deferred, to the end of this one.
        """
        if _TEXT in self._deferred():
            return
        if not scalar(self._conn, "SELECT EXISTS (SELECT 1 FROM chunk_texts)"):
            with self._transaction():
                crashpoint("store.defer_index")
                self._defer(_TEXT)
                self._conn.execute("DROP INDEX IF EXISTS chunk_texts_tsv")
        elif not self._has_index("chunk_texts_tsv"):
            self._build(_TEXT)

    def finish_vectors(self, dimension: int) -> None:
        """Build every deferred index and the HNSW index of each dimension that has more
        than ``ann_above`` vectors and none yet (after a load: a coordinator once its
        workers are done), each in a transaction that also removes its note.

        An index, once built, grows with each write and is never dropped: a dimension whose
        vectors fall below the threshold again keeps it (searching it is no slower).
        """
        deferred = self._deferred()
        if _TEXT in deferred:
            self._build(_TEXT)
        # Notes of vector indexes, written by earlier versions, are decided as any dimension.
        dimensions = {dimension, *(int(name) for name in deferred if name != _TEXT)}
        for each in sorted(dimensions):
            if self.needs_vector_index(each):
                self._build(str(each))
            elif str(each) in deferred:
                with self._transaction():
                    self._conn.execute("DELETE FROM meta WHERE name = %s",
                                       (DEFERRED_PREFIX + str(each),))

    def needs_vector_index(self, dimension: int) -> bool:
        """Whether ``dimension`` has more than ``ann_above`` vectors (0: never) and no
        HNSW index yet; counted no further than the threshold."""
        if (not self.ann_above or dimension > HNSW_MAX_DIMENSION
                or self._has_index(f"embeddings_hnsw_{dimension}")):
            return False
        return bool(scalar(self._conn, "SELECT count(*) > %s FROM (SELECT 1 FROM embeddings "
                                       "WHERE dimension = %s LIMIT %s) e",
                           (self.ann_above, dimension, self.ann_above + 1)))

    def _deferred(self) -> set[str]:
        """The names of the deferred indexes (``text``, or a dimension)."""
        return {str(r[0])[len(DEFERRED_PREFIX):] for r in self._conn.execute(
            "SELECT name FROM meta WHERE starts_with(name, %s)", (DEFERRED_PREFIX,))}

    def _defer(self, name: str) -> None:
        self._conn.execute("INSERT INTO meta (name, value) VALUES (%s, '1') "
                           "ON CONFLICT (name) DO NOTHING", (DEFERRED_PREFIX + name,))

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
