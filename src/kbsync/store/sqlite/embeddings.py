"""The embedding cache: vectors by chunk digest and embedder, and what still needs one."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping

import numpy as np
import numpy.typing as npt

from kbsync.crashpoints import crashpoint
from kbsync.store.rows import CURRENT, DIMENSION_PREFIX, INDEXED, by_text_key
from kbsync.store.sqlite.connection import SqliteBase
from kbsync.store.sqlite.schema import DIMENSIONS

__all__ = ["EmbeddingTables"]


class EmbeddingTables(SqliteBase):
    """The :class:`~kbsync.store.EmbeddingCache` role of the SQLite store."""

    def cached(self, embedder: str, digests: Collection[str]) -> set[str]:
        found: set[str] = set()
        items = list(digests)
        for i in range(0, len(items), 500):
            batch = items[i : i + 500]
            marks = ",".join("?" * len(batch))
            found.update(r[0] for r in self._db.execute(
                f"SELECT digest FROM embeddings WHERE embedder = ? AND digest IN ({marks})",
                (embedder, *batch),
            ))
        return found

    def unembedded(self, source: str, embedder: str) -> dict[str, str]:
        # Texts are looked up only for the missing digests: a no-op sync asks this of
        # every chunk, and almost none is missing.
        return dict(self._db.execute(
            "SELECT t.digest, t.text FROM chunk_texts t WHERE t.digest IN ("
            f"SELECT c.digest FROM documents d JOIN chunks c ON {CURRENT} "
            "WHERE d.source = ? AND NOT EXISTS (SELECT 1 FROM embeddings e "
            f"WHERE e.digest = c.digest AND e.embedder = ?) AND {INDEXED})",
            (source, embedder),
        ).fetchall())

    def adopt_by_text(self, embedder: str, text_keys: Mapping[str, bytes], *,
                      write: bool = True) -> set[str]:
        wanting = by_text_key(text_keys)
        keys = list(wanting)
        holders: dict[bytes, str] = {}  # a text's key -> a digest holding its vector
        for i in range(0, len(keys), 500):
            batch = keys[i : i + 500]
            holders.update(self._db.execute(
                "SELECT t.text_key, min(t.digest) FROM chunk_texts t JOIN embeddings e "
                "ON e.digest = t.digest AND e.embedder = ? "
                f"WHERE t.text_key IN ({','.join('?' * len(batch))}) GROUP BY t.text_key",
                (embedder, *batch)).fetchall())
        found = [(digest, holder) for key, holder in holders.items() for digest in wanting[key]]
        if write and found:
            self._vectors.clear()
            with self._transaction() as db:
                crashpoint("store.adopt_vectors")
                db.executemany(
                    "INSERT OR IGNORE INTO embeddings (digest, embedder, dimension, vector) "
                    "SELECT ?, embedder, dimension, vector FROM embeddings "
                    "WHERE digest = ? AND embedder = ?",
                    ((digest, holder, embedder) for digest, holder in found))
        return {digest for digest, _ in found}

    def put_vectors(self, embedder: str,
                    vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if not vectors:
            return
        self._vectors.clear()
        with self._transaction() as db:
            self._insert_vectors(db, embedder, vectors)

    def _insert_vectors(self, db: sqlite3.Connection, embedder: str,
                        vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if not vectors:
            return
        crashpoint("store.write_vectors")
        rows = [(digest, np.asarray(vector, dtype=np.float32)) for digest, vector in
                vectors.items()]
        db.executemany(
            "INSERT OR IGNORE INTO embeddings (digest, embedder, dimension, vector) "
            "VALUES (?, ?, ?, ?)",
            ((digest, embedder, int(v.shape[0]), v.tobytes()) for digest, v in rows),
        )
        db.executemany("INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)",
                       {(DIMENSION_PREFIX + embedder, str(v.shape[0])) for _, v in rows})

    def vectors(self, embedder: str,
                digests: Collection[str]) -> dict[str, npt.NDArray[np.float32]]:
        found: dict[str, npt.NDArray[np.float32]] = {}
        items = list(digests)
        for i in range(0, len(items), 500):
            batch = items[i : i + 500]
            marks = ",".join("?" * len(batch))
            for digest, blob in self._db.execute(
                f"SELECT digest, vector FROM embeddings WHERE embedder = ? AND digest IN ({marks})",
                (embedder, *batch),
            ):
                found[digest] = np.frombuffer(blob, dtype=np.float32)
        return found

    def embedder_dimensions(self) -> dict[str, int]:
        return {r[0][len(DIMENSION_PREFIX):]: int(r[1]) for r in self._db.execute(
            f"SELECT name, value FROM meta WHERE {DIMENSIONS}")}
