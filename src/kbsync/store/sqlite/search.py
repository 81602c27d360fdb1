"""Search: full text (FTS5 bm25), exact vector search over the cached matrix, windows."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING

from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import ChunkRef, Hit, Nearest, Window
from kbsync.store.filters import Filters, sqlite_condition
from kbsync.store.rows import CURRENT, HIT_COLUMNS, INDEXED, as_hit, query_terms, window_span
from kbsync.store.sqlite.connection import SqliteBase
from kbsync.store.sqlite.schema import CURRENT_TEXT, FTS_WEIGHTS, MATCHING_CHUNKS

if TYPE_CHECKING:  # NumPy is imported where vectors are read or written
    import numpy as np
    import numpy.typing as npt

__all__ = ["SearchTables"]


class SearchTables(SqliteBase):
    """The :class:`~kbsync.store.SearchIndex` role of the SQLite store."""

    _HIT = (f"SELECT {HIT_COLUMNS} FROM chunks c JOIN documents d ON {CURRENT} "
            "JOIN chunk_texts t ON t.digest = c.digest ")

    def search_text(self, query: str, k: int, filters: Filters | None = None) -> list[Hit]:
        terms = query_terms(query)
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        restrict, args = "", list[object]()
        if filters:
            # Only the matching documents' indexed chunks are ranked, so a filter that
            # matches few documents loses none of their hits to the best of the rest.
            # "+rowid": a plain rowid constraint is handed to FTS5, which then evaluates
            # the query once per allowed row (15x slower than filtering its matches).
            where, args = sqlite_condition(filters)
            restrict = f" AND +rowid IN ({MATCHING_CHUNKS} WHERE {INDEXED} AND {where})"
        rows = self._db.execute(
            f"SELECT {HIT_COLUMNS}, f.rank FROM (SELECT rowid, bm25(chunk_fts, {FTS_WEIGHTS}) "
            f"AS rank FROM chunk_fts WHERE chunk_fts MATCH ?{restrict} ORDER BY rank LIMIT ?) f "
            "JOIN chunks c ON c.id = f.rowid "
            f"JOIN documents d ON {CURRENT} JOIN chunk_texts t ON t.digest = c.digest "
            f"WHERE {INDEXED} ORDER BY f.rank",
            (match, *args, 4 * k + 10),  # room for boilerplate rows filtered out after ranking
        ).fetchall()[:k]
        # bm25() is lower-is-better and negative; report its negation as the score.
        return [as_hit(r, score=-float(r[10])) for r in rows]

    def _vector_matrix(self, embedder: str,
                       norm: VectorNorm) -> tuple[npt.NDArray[np.float32], list[int]]:
        """The sound vectors of the current, indexed chunks, and their chunk ids.

        The ids of the chunks whose vector cannot be right (its size not its dimension,
        not finite, or not of ``norm``: damaged) are kept aside (:attr:`_unsound`): a
        vector search never ranks them. Checking costs one more pass over the matrix
        when it is read, not one per search.
        """
        import numpy as np

        # data_version changes when another connection commits; our own writes clear the cache.
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._vectors.clear()
            self._data_version = version
        cached = self._vectors.get(embedder)
        if cached is not None and self._unsound.get(embedder, (None,))[0] == norm:
            return cached
        rows = self._db.execute(
            f"SELECT c.id, e.vector, e.dimension FROM documents d JOIN chunks c ON {CURRENT} "
            f"JOIN embeddings e ON e.digest = c.digest AND e.embedder = ? WHERE {INDEXED}",
            (embedder,),
        ).fetchall()
        sized = [r for r in rows if len(r[1]) == 4 * r[2]]
        dims = {r[2] for r in sized}
        if len(dims) > 1:  # verify says so; the vectors of the query's dimension are meant
            common = max(dims, key=lambda d: sum(r[2] == d for r in sized))
            sized = [r for r in sized if r[2] == common]
        if not sized:
            matrix = np.zeros((0, 0), dtype=np.float32)
        else:
            matrix = np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in sized])
        with np.errstate(over="ignore", invalid="ignore"):
            wrong = norm.unsound(np.sqrt(np.einsum("ij,ij->i", matrix, matrix,
                                                   dtype=np.float64)))
        unsound = {int(r[0]) for r in rows} - {int(r[0]) for r in sized}
        if wrong.any():
            unsound |= {int(sized[i][0]) for i in np.flatnonzero(wrong).tolist()}
            matrix = matrix[~wrong]
            sized = [r for r, bad in zip(sized, wrong.tolist(), strict=True) if not bad]
        ids = [int(r[0]) for r in sized]
        self._vectors[embedder] = (matrix, ids)
        self._unsound[embedder] = (norm, np.fromiter(sorted(unsound), dtype=np.int64))
        return matrix, ids

    def _filtered_rows(self, embedder: str, filters: Filters,
                       norm: VectorNorm) -> tuple[npt.NDArray[np.intp], int]:
        """Rows of the vector matrix that belong to documents meeting ``filters``, and how
        many of those documents' chunks have an unsound vector."""
        import numpy as np

        ids = self._vector_matrix(embedder, norm)[1]
        unsound = self._unsound[embedder][1]
        if not ids and not len(unsound):
            return np.zeros(0, dtype=np.intp), 0
        where, args = sqlite_condition(filters)
        wanted = np.fromiter((r[0] for r in self._db.execute(
            f"{MATCHING_CHUNKS} WHERE {where}", args)), dtype=np.int64)
        left_out = int(np.isin(unsound, wanted).sum())
        if not ids:
            return np.zeros(0, dtype=np.intp), left_out
        order = self._vector_order(embedder, ids)
        sorted_ids = np.asarray(ids, dtype=np.int64)[order]
        at = np.searchsorted(sorted_ids, wanted)
        found = at < len(sorted_ids)
        found[found] = sorted_ids[at[found]] == wanted[found]
        rows: npt.NDArray[np.intp] = np.sort(order[at[found]])
        return rows, left_out

    def _vector_order(self, embedder: str, ids: list[int]) -> npt.NDArray[np.intp]:
        # The sort of the matrix's chunk ids, kept beside it (the matrix is rebuilt, and
        # this forgotten, whenever the store changes).
        import numpy as np

        cached = self._vector_orders.get(embedder)
        if cached is None or cached[0] is not ids:
            cached = (ids, np.argsort(np.asarray(ids, dtype=np.int64), kind="stable"))
            self._vector_orders[embedder] = cached
        return cached[1]

    def search_vector(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                      filters: Filters | None = None, norm: VectorNorm | None = None,
                      ) -> Nearest:
        import numpy as np

        norm = norm or ANY_NORM
        matrix, ids = self._vector_matrix(embedder, norm)
        unsound = len(self._unsound[embedder][1])
        if filters:
            # Exact over the matching documents' vectors only: no top-k of all, then filtered.
            chosen, unsound = self._filtered_rows(embedder, filters, norm)
            matrix, ids = matrix[chosen], [ids[i] for i in chosen.tolist()]
        if not ids:
            return Nearest([], unsound)
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        if k < len(scores):  # select the best k in linear time, then order only those
            best = np.argpartition(-scores, k)[:k]
            top = best[np.argsort(-scores[best], kind="stable")]
        else:
            top = np.argsort(-scores, kind="stable")
        wanted = [ids[i] for i in top.tolist()]
        marks = ",".join("?" * len(wanted))
        rows = {r["id"]: r for r in self._db.execute(
            self._HIT.replace("SELECT ", "SELECT c.id AS id, ", 1) + f"WHERE c.id IN ({marks})",
            wanted)}
        return Nearest([as_hit(tuple(rows[ids[i]])[1:], score=float(scores[i]))
                        for i in top.tolist() if ids[i] in rows], unsound)

    def hits_at(self, refs: Sequence[tuple[str, str, int, str]],
                scores: Sequence[float]) -> list[Hit]:
        out = []
        for (source, key, index, digest), score in zip(refs, scores, strict=True):
            row = self._db.execute(
                self._HIT + f"WHERE d.source = ? AND d.key = ? AND c.idx = ? AND c.digest = ? "
                f"AND {INDEXED}",
                (source, key, index, digest),
            ).fetchone()
            if row is not None:
                out.append(as_hit(row, score=score))
        return out

    def window(self, hit: Hit, budget: int, taken: Collection[int] = ()) -> Window:
        # The text is sliced in SQLite: selected beside each chunk row, it would be
        # a copy of the whole document per chunk.
        rows = self._db.execute(
            "SELECT c.idx, c.start, c.\"end\", c.tokens, c.section FROM documents d "
            f"JOIN chunks c ON {CURRENT} "
            "WHERE d.source = ? AND d.key = ? ORDER BY c.idx",
            (hit.source, hit.key),
        ).fetchall()
        span = window_span(rows, hit.index, budget, taken)
        if span is None:
            return Window(hit.index, hit.index, hit.text, 0)
        first, last, tokens = span
        start, end = rows[first][1], rows[last][2]
        text = self._db.execute(
            "SELECT substr(CAST(t.text AS TEXT), ?, ?) FROM documents d "
            f"JOIN versions t ON {CURRENT_TEXT} WHERE d.source = ? AND d.key = ?",
            (start + 1, end - start, hit.source, hit.key),
        ).fetchone()
        if text is None:  # the document's text is gone (verify says so): the chunk alone
            return Window(hit.index, hit.index, hit.text, 0)
        return Window(first, last, text[0], tokens)

    def indexed_chunks(self, source: str | None = None, key: str | None = None,
                       filters: Filters | None = None) -> Iterator[ChunkRef]:
        sql = (f"SELECT d.source, d.key, c.idx, c.digest, c.heading, c.start, c.\"end\" "
               f"FROM documents d JOIN chunks c ON {CURRENT} WHERE {INDEXED}")
        args: list[object] = []
        for column, value in (("source", source), ("key", key)):
            if value is not None:
                sql += f" AND d.{column} = ?"
                args.append(value)
        if filters:
            where, more = sqlite_condition(filters)
            sql = sql.replace(" JOIN chunks", " CROSS JOIN chunks", 1) + f" AND {where}"
            args += more
        for row in self._db.execute(sql + " ORDER BY d.source, d.key, c.idx", args).fetchall():
            yield ChunkRef(*row)
