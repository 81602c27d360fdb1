"""The stored values of the SQLite store checked (:mod:`kbsync.store.values`), and the damaged
ones discarded so that a repair makes them again."""

from __future__ import annotations

from collections.abc import Callable, Collection

from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import Discarded
from kbsync.store.rows import CURRENT
from kbsync.store.sqlite.connection import SqliteBase
from kbsync.store.values import Damage, damaged_chunk_texts, damaged_texts, damaged_vectors

__all__ = ["ValueChecks"]


class ValueChecks(SqliteBase):
    """Checking what the tables hold, row by row as they are read (never all at once)."""

    def _value_damage(self, embedder: str, identity: Callable[[str], str] | None,
                      derivations: Collection[str] | None, norm: VectorNorm | None) -> Damage:
        """The damaged chunk texts, kept texts and vectors (see :mod:`kbsync.store.values`).

        Texts are read as bytes: a damaged one need not even be UTF-8.
        """
        db = self._db
        made = () if derivations is None else tuple(sorted(derivations))
        args: tuple[str, ...]
        if identity is None or (derivations is not None and not made):
            checkable, args = "0", ()  # no chunk's identity can be computed
        else:
            where = f" AND d.derivation IN ({', '.join('?' * len(made))})" if made else ""
            checkable = (f"EXISTS (SELECT 1 FROM chunks c JOIN documents d ON {CURRENT} "
                         f"WHERE c.digest = t.digest{where})")
            args = made
        chunk_texts = tuple(damaged_chunk_texts(db.execute(
            f"SELECT t.digest, CAST(t.text AS BLOB), t.text_key, {checkable} "
            "FROM chunk_texts t", args), identity))
        texts = tuple(damaged_texts(db.execute(
            "SELECT d.source, d.key, v.generation, v.generation = d.generation, "
            "CAST(v.text AS BLOB), v.text_key FROM versions v JOIN documents d "
            "ON d.id = v.doc_id ORDER BY d.id, v.generation")))
        vectors = tuple(damaged_vectors(db.execute(
            "SELECT digest, embedder, dimension, vector FROM embeddings"), embedder,
            norm or ANY_NORM))
        return Damage(chunk_texts, texts, vectors)

    def discard_damaged(self, embedder: str, identity: Callable[[str], str] | None,
                        derivations: Collection[str] | None = None,
                        norm: VectorNorm | None = None) -> Discarded:
        damage = self._value_damage(embedder, identity, derivations, norm)
        if not damage:
            return Discarded()
        self._vectors.clear()
        with self._transaction() as db:
            db.executemany("DELETE FROM embeddings WHERE digest = ? AND embedder = ?",
                           ((v.digest, v.embedder) for v in damage.vectors))
            # The full-text rows hold copies of the damaged texts: they go too, and the
            # repair's full-text step fills them again from the restored chunk texts.
            db.executemany("DELETE FROM chunk_fts WHERE rowid IN "
                           "(SELECT id FROM chunks WHERE digest = ?)",
                           ((d,) for d in damage.chunk_texts))
            db.executemany("DELETE FROM chunk_texts WHERE digest = ?",
                           ((d,) for d in damage.chunk_texts))
            for text in damage.texts:
                row = db.execute("SELECT id FROM documents WHERE source = ? AND key = ?",
                                 (text.source, text.key)).fetchone()
                if row is None:
                    continue
                db.execute("DELETE FROM versions WHERE doc_id = ? AND generation = ?",
                           (row[0], text.generation))
                if text.current:
                    # Unknown to the gates (no stat, validators or hashes to match), the
                    # document is read, extracted and written again by the next sync.
                    db.execute(
                        "UPDATE documents SET size = NULL, mtime_ns = NULL, inode = NULL, "
                        "etag = NULL, last_modified = NULL, bytes_hash = '', text_hash = '' "
                        "WHERE id = ?", (row[0],))
        current = sum(t.current for t in damage.texts)
        return Discarded(vectors=len(damage.vectors), chunk_texts=len(damage.chunk_texts),
                         previous=len(damage.texts) - current, current=current)
