"""The stored values of the PostgreSQL store checked (:mod:`kbsync.store.values`), and the
damaged ones discarded so that a repair makes them again."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import Discarded
from kbsync.store.postgres.connection import PostgresBase
from kbsync.store.rows import CURRENT
from kbsync.store.values import (
    Damage,
    DamagedVector,
    damaged_chunk_texts,
    damaged_texts,
    sound_sql,
)

__all__ = ["ValueChecks"]


class ValueChecks(PostgresBase):
    """Checking what the tables hold, row by row as the server streams them."""

    def _stream(self, sql: str, args: Sequence[Any] = ()) -> Iterator[Sequence[Any]]:
        """The rows of a query as the server sends them: a big store is never held at once
        (a plain execute fetches every row before the first is seen)."""
        yield from self._conn.cursor().stream(sql, args)

    def _value_damage(self, embedder: str, identity: Callable[[str], str] | None,
                      derivations: Collection[str] | None, norm: VectorNorm | None) -> Damage:
        """The damaged chunk texts, kept texts and vectors (see :mod:`kbsync.store.values`).

        pgvector stores no NaN or infinity, so a vector's norm is all there is to check,
        and the server computes it: only the damaged vectors' digests come back.
        """
        made = () if derivations is None else tuple(sorted(derivations))
        args: tuple[str, ...]
        if identity is None or (derivations is not None and not made):
            checkable, args = "FALSE", ()
        else:
            where = f" AND d.derivation IN ({', '.join(['%s'] * len(made))})" if made else ""
            checkable = (f"EXISTS (SELECT 1 FROM chunks c JOIN documents d ON {CURRENT} "
                         f"WHERE c.digest = t.digest{where})")
            args = made
        chunk_texts = tuple(damaged_chunk_texts(self._stream(
            f"SELECT t.digest, t.text, t.text_key, {checkable} FROM chunk_texts t", args),
            identity))
        texts = tuple(damaged_texts(_versions(self._stream(
            "SELECT d.source, d.key, d.generation, t.text, t.text_key, t.previous, "
            "t.previous_key FROM texts t JOIN documents d ON d.id = t.doc_id ORDER BY d.id"))))
        norm = norm or ANY_NORM
        vectors = tuple(DamagedVector(digest, embedder, float(size)) for digest, size in
                        self._stream(
                            "SELECT digest, vector_norm(vector) FROM embeddings "
                            f"WHERE embedder = %s AND NOT {sound_sql(norm, 'vector_norm(vector)')}",
                            (embedder,)))
        return Damage(chunk_texts, texts, vectors)

    def discard_damaged(self, embedder: str, identity: Callable[[str], str] | None,
                        derivations: Collection[str] | None = None,
                        norm: VectorNorm | None = None) -> Discarded:
        damage = self._value_damage(embedder, identity, derivations, norm)
        if not damage:
            return Discarded()
        with self._transaction():
            # The full-text vector of a chunk text is a column of its row: it goes with it.
            self._write_many("DELETE FROM embeddings WHERE digest = %s AND embedder = %s",
                             [(v.digest, v.embedder) for v in damage.vectors])
            self._write_many("DELETE FROM chunk_texts WHERE digest = %s",
                             [(d,) for d in damage.chunk_texts])
            for text in damage.texts:
                this = (text.source, text.key)
                if not text.current:
                    self._write("UPDATE texts t SET previous = NULL, previous_key = NULL "
                                "FROM documents d WHERE d.id = t.doc_id AND d.source = %s "
                                "AND d.key = %s", this)
                    continue
                # One row holds both texts, so the previous goes too; the document, unknown
                # to the gates (no stat, validators or hashes to match), is read, extracted
                # and written again by the next sync.
                self._write("DELETE FROM texts t USING documents d WHERE d.id = t.doc_id "
                            "AND d.source = %s AND d.key = %s", this)
                self._write("UPDATE documents SET size = NULL, mtime_ns = NULL, inode = NULL, "
                            "etag = NULL, last_modified = NULL, bytes_hash = '', "
                            "text_hash = '' WHERE source = %s AND key = %s", this)
        current = sum(t.current for t in damage.texts)
        return Discarded(vectors=len(damage.vectors), chunk_texts=len(damage.chunk_texts),
                         previous=len(damage.texts) - current, current=current)


def _versions(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``texts`` (each the current and the previous text of a document) as one
    row per kept version, as :func:`~kbsync.store.values.damaged_texts` reads them."""
    for source, key, generation, text, text_key, previous, previous_key in rows:
        yield source, key, generation, True, text, text_key
        if previous is not None:
            yield source, key, generation - 1, False, previous, previous_key
