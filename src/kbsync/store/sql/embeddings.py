"""The embedding cache: vectors by chunk digest and embedder, and what still needs one,
written once over a dialect."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from kbsync.crashpoints import crashpoint
from kbsync.store.rows import CURRENT, DIMENSION_PREFIX, INDEXED, by_text_key
from kbsync.store.sql.base import SqlBase

if TYPE_CHECKING:  # NumPy is imported where vectors are read or written
    import numpy as np
    import numpy.typing as npt

__all__ = ["EmbeddingTables"]


class EmbeddingTables(SqlBase):
    """The :class:`~kbsync.store.EmbeddingCache` role, and the cached vectors a
    :class:`~kbsync.store.Mirror` reads."""

    def cached(self, embedder: str, digests: Collection[str]) -> set[str]:
        found: set[str] = set()
        for listed, args in self._dialect.any_of("digest", list(digests)):
            found.update(r[0] for r in self._dialect.rows(
                f"SELECT digest FROM embeddings WHERE embedder = ? AND {listed}",
                (embedder, *args)))
        return found

    def unembedded(self, source: str, embedder: str) -> dict[str, str]:
        # Texts are looked up only for the missing digests: a no-op sync asks this of
        # every chunk, and almost none is missing.
        return {r[0]: r[1] for r in self._dialect.rows(
            "SELECT t.digest, t.text FROM chunk_texts t WHERE t.digest IN ("
            f"SELECT c.digest FROM documents d JOIN chunks c ON {CURRENT} "
            "WHERE d.source = ? AND NOT EXISTS (SELECT 1 FROM embeddings e "
            f"WHERE e.digest = c.digest AND e.embedder = ?) AND {INDEXED})",
            (source, embedder))}

    def adopt_by_text(self, embedder: str, text_keys: Mapping[str, bytes], *,
                      write: bool = True) -> set[str]:
        wanting = by_text_key(text_keys)
        holders: dict[bytes, str] = {}  # a text's key -> a digest holding its vector
        for listed, args in self._dialect.any_of("t.text_key", list(wanting)):
            holders.update((bytes(key), holder) for key, holder in self._dialect.rows(
                "SELECT t.text_key, min(t.digest) FROM chunk_texts t JOIN embeddings e "
                f"ON e.digest = t.digest AND e.embedder = ? WHERE {listed} GROUP BY t.text_key",
                (embedder, *args)))
        # Shared rows are inserted in digest order, so concurrent writers never deadlock.
        found = sorted((digest, holder) for key, holder in holders.items()
                       for digest in wanting[key])
        if write and found:
            self._invalidate()
            with self._transaction():
                crashpoint("store.adopt_vectors")
                columns = (("digest", "text"), ("holder", "text"))
                self._dialect.send_many(
                    "INSERT INTO embeddings (digest, embedder, dimension, vector) "
                    f"SELECT u.digest, e.embedder, e.dimension, e.vector FROM "
                    f"{self._dialect.each(columns)} JOIN embeddings e ON e.digest = u.holder "
                    "AND e.embedder = ? ORDER BY u.digest ON CONFLICT DO NOTHING",
                    self._dialect.bind_each(columns, found, after=(embedder,)))
        return {digest for digest, _ in found}

    def prepare_vectors(self, dimension: int) -> None:
        """No index here is deferred on a first load (a backend whose indexes are dear to
        grow row by row overrides it, with :meth:`finish_vectors`)."""

    def finish_vectors(self, dimension: int) -> None:
        """Nothing was deferred."""

    def put_vectors(self, embedder: str,
                    vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if not vectors:
            return
        self._invalidate()
        with self._transaction():
            self._insert_vectors(embedder, vectors)

    def _insert_vectors(self, embedder: str,
                        vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        """Cache ``vectors`` of ``embedder`` (in the caller's transaction), in digest order."""
        import numpy as np

        if not vectors:
            return
        rows = [(digest, np.asarray(vector, dtype=np.float32))
                for digest, vector in sorted(vectors.items())]
        dimensions = sorted({int(v.shape[0]) for _, v in rows})
        self._vectors_arriving(dimensions)
        crashpoint("store.write_vectors")
        vector = self._dialect.vector
        self._dialect.send_many(
            "INSERT INTO embeddings (digest, embedder, dimension, vector) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [(digest, embedder, int(v.shape[0]), vector(v)) for digest, v in rows])
        self._dialect.send_many("INSERT INTO meta (name, value) VALUES (?, ?) "
                                "ON CONFLICT DO NOTHING",
                                [(DIMENSION_PREFIX + embedder, str(d)) for d in dimensions])

    def vectors(self, embedder: str,
                digests: Collection[str]) -> dict[str, npt.NDArray[np.float32]]:
        found: dict[str, npt.NDArray[np.float32]] = {}
        array = self._dialect.array
        for listed, args in self._dialect.any_of("digest", list(digests)):
            for digest, stored in self._dialect.rows(
                    f"SELECT digest, vector FROM embeddings WHERE embedder = ? AND {listed}",
                    (embedder, *args)):
                found[digest] = array(stored)
        return found

    def embedder_dimensions(self) -> dict[str, int]:
        named, args = self._dialect.starts_with("name", DIMENSION_PREFIX)
        return {r[0][len(DIMENSION_PREFIX):]: int(r[1]) for r in self._dialect.rows(
            f"SELECT name, value FROM meta WHERE {named}", args)}
