"""Verify over a dialect: the shared invariants and the stored values checked
(:mod:`kbsync.store.values`), and the damaged values discarded so that they are made again.

The values are read from the core's tables (kept texts in ``versions``); a backend that
keeps its texts otherwise, or checks its file or indexes too, has its own verify.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import Discarded, invariants
from kbsync.store.rows import CURRENT
from kbsync.store.sql.digests import drift_lines
from kbsync.store.sql.maintenance import MaintenanceTables
from kbsync.store.values import (
    Damage,
    damaged_chunk_texts,
    damaged_texts,
    damaged_vectors,
    lines,
    summary,
)

__all__ = ["CheckTables"]


class CheckTables(MaintenanceTables):
    """:meth:`~kbsync.store.Maintenance.verify` and ``discard_damaged``, row by row as the
    tables are read (never all at once)."""

    def verify(self, embedder: str, identity: Callable[[str], str] | None,
               derivations: Collection[str] | None = None,
               norm: VectorNorm | None = None) -> list[str]:
        sql = self._dialect
        problems = invariants.problems(
            sql.stream, embedder, mark="?", bad_vectors="SELECT count(*) FROM embeddings "
            f"WHERE {sql.vector_size('vector')} != dimension")
        problems += drift_lines(self.digest_drift())
        values = self._value_damage(embedder, identity, derivations, norm)
        self.remember_damage(summary(values) if values else None)
        return problems + lines(values, norm or ANY_NORM)

    def _value_damage(self, embedder: str, identity: Callable[[str], str] | None,
                      derivations: Collection[str] | None, norm: VectorNorm | None) -> Damage:
        """The damaged chunk texts, kept texts and vectors (see :mod:`kbsync.store.values`).

        Texts are read as bytes: a damaged one need not even be UTF-8.
        """
        sql = self._dialect
        made = () if derivations is None else tuple(sorted(derivations))
        args: tuple[str, ...]
        if identity is None or (derivations is not None and not made):
            checkable, args = "1 = 0", ()  # no chunk's identity can be computed
        else:
            where = f" AND d.derivation IN ({', '.join('?' * len(made))})" if made else ""
            checkable = (f"EXISTS (SELECT 1 FROM chunks c JOIN documents d ON {CURRENT} "
                         f"WHERE c.digest = t.digest{where})")
            args = made
        chunk_texts = tuple(damaged_chunk_texts(sql.stream(
            f"SELECT t.digest, {sql.as_bytes('t.text')}, t.text_key, {checkable} "
            "FROM chunk_texts t", args), identity))
        texts = tuple(damaged_texts(sql.stream(
            "SELECT d.source, d.key, v.generation, v.generation = d.generation, "
            f"{sql.as_bytes('v.text')}, v.text_key FROM versions v JOIN documents d "
            "ON d.id = v.doc_id ORDER BY d.id, v.generation")))
        vectors = tuple(damaged_vectors(
            ((digest, owner, dimension, sql.vector_bytes(stored))
             for digest, owner, dimension, stored in sql.stream(
                 "SELECT digest, embedder, dimension, vector FROM embeddings")),
            embedder, norm or ANY_NORM))
        return Damage(chunk_texts, texts, vectors)

    def discard_damaged(self, embedder: str, identity: Callable[[str], str] | None,
                        derivations: Collection[str] | None = None,
                        norm: VectorNorm | None = None) -> Discarded:
        damage = self._value_damage(embedder, identity, derivations, norm)
        if not damage:
            return Discarded()
        self._invalidate()
        sql = self._dialect
        with self._transaction():
            sql.send_many("DELETE FROM embeddings WHERE digest = ? AND embedder = ?",
                          [(v.digest, v.embedder) for v in damage.vectors])
            self._discarding_chunk_texts(damage.chunk_texts)
            sql.send_many("DELETE FROM chunk_texts WHERE digest = ?",
                          [(d,) for d in damage.chunk_texts])
            for text in damage.texts:
                this = (text.source, text.key)
                sql.write("DELETE FROM versions WHERE generation = ? AND doc_id = "
                          "(SELECT id FROM documents WHERE source = ? AND key = ?)",
                          (text.generation, *this))
                if text.current:
                    # Unknown to the gates (no stat, validators or hashes to match), the
                    # document is read, extracted and written again by the next sync.
                    sql.write("UPDATE documents SET size = NULL, mtime_ns = NULL, inode = NULL, "
                              "etag = NULL, last_modified = NULL, bytes_hash = '', "
                              "text_hash = '' WHERE source = ? AND key = ?", this)
        current = sum(t.current for t in damage.texts)
        return Discarded(vectors=len(damage.vectors), chunk_texts=len(damage.chunk_texts),
                         previous=len(damage.texts) - current, current=current)

    def _discarding_chunk_texts(self, digests: Sequence[str]) -> None:
        """These chunk texts are damaged and about to be discarded (a backend that keeps
        copies of them, as full text, drops those too)."""
