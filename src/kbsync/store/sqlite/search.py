"""Search: full text (FTS5 bm25), exact vector search over the cached matrix, windows."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING

from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import ChunkRef, Hit, Nearest, Window
from kbsync.store.filters import Filters, sqlite_condition
from kbsync.store.rows import CURRENT, HIT_COLUMNS, INDEXED, as_hit, query_terms, window_span
from kbsync.store.sqlite.ann import ANN_ABOVE, ann_available
from kbsync.store.sqlite.connection import SqliteBase
from kbsync.store.sqlite.schema import CURRENT_TEXT, FTS_WEIGHTS, MATCHING_CHUNKS

if TYPE_CHECKING:  # NumPy is imported where vectors are read or written
    import numpy as np
    import numpy.typing as npt

__all__ = ["SearchTables"]

# Candidates asked of the approximate index at least (4k for a bigger k): the re-score
# picks the best k of them.
_FETCH = 40

_hinted = False


def _hint_once(count: int) -> None:
    """Say once per process that a big store would search faster with the ``ann`` extra."""
    global _hinted
    if not _hinted:
        _hinted = True
        logging.getLogger("kbsync.store").warning(
            "vector search scans all %s chunks exactly; pip install 'kbsync[ann]' for an "
            "approximate index with an exact re-score (faster above %s chunks)",
            f"{count:,}", f"{ANN_ABOVE:,}")


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
        _, order, sorted_ids = self._vector_order(embedder, ids)
        at = np.searchsorted(sorted_ids, wanted)
        found = at < len(sorted_ids)
        found[found] = sorted_ids[at[found]] == wanted[found]
        rows: npt.NDArray[np.intp] = np.sort(order[at[found]])
        return rows, left_out

    def _vector_order(self, embedder: str, ids: list[int],
                      ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp],
                                 npt.NDArray[np.int64]]:
        """The matrix's chunk ids as an array, their sort and the sorted ids, kept beside it
        (the matrix is rebuilt, and these forgotten, whenever the store changes): made
        from the list of a million ids, they would cost a search 30 ms."""
        import numpy as np

        cached = self._vector_orders.get(embedder)
        if cached is None or cached[0] is not ids:
            named = np.asarray(ids, dtype=np.int64)
            order = np.argsort(named, kind="stable")
            cached = (ids, named, order, named[order])
            self._vector_orders[embedder] = cached
        return cached[1:]

    def search_vector(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                      filters: Filters | None = None, norm: VectorNorm | None = None,
                      ) -> Nearest:
        import numpy as np

        norm = norm or ANY_NORM
        matrix, ids = self._vector_matrix(embedder, norm)
        unsound = len(self._unsound[embedder][1])
        chosen: npt.NDArray[np.intp] | None = None
        if filters:
            # Exact over the matching documents' vectors only: no top-k of all, then filtered.
            chosen, unsound = self._filtered_rows(embedder, filters, norm)
        if not ids or (chosen is not None and not len(chosen)):
            return Nearest([], unsound)
        query = np.asarray(vector, dtype=np.float32)
        rows = self._rows_to_score(embedder, matrix, ids, query, k, chosen)
        # Every row asked about is scored exactly against the current matrix: what the
        # approximate index offers is only a shorter list of rows.
        scores = matrix @ query if rows is None else matrix[rows] @ query
        if k < len(scores):  # select the best k in linear time, then order only those
            best = np.argpartition(-scores, k)[:k]
            top = best[np.argsort(-scores[best], kind="stable")]
        else:
            top = np.argsort(-scores, kind="stable")
        at = top if rows is None else rows[top]
        wanted = [ids[i] for i in at.tolist()]
        marks = ",".join("?" * len(wanted))
        found = {r["id"]: r for r in self._db.execute(
            self._HIT.replace("SELECT ", "SELECT c.id AS id, ", 1) + f"WHERE c.id IN ({marks})",
            wanted)}
        return Nearest([as_hit(tuple(found[chunk])[1:], score=float(scores[i]))
                        for chunk, i in zip(wanted, top.tolist(), strict=True)
                        if chunk in found], unsound)

    def _rows_to_score(self, embedder: str, matrix: npt.NDArray[np.float32], ids: list[int],
                       query: npt.NDArray[np.float32], k: int,
                       chosen: npt.NDArray[np.intp] | None, *,
                       wait: bool = False) -> npt.NDArray[np.intp] | None:
        """The matrix rows a search scores exactly: the approximate index's candidates
        when it has enough of them, else the rows meeting the filter (``chosen``), else
        None: every row.

        A filter matching fewer rows than the index's threshold is scanned exactly (as
        fast, and nothing lost); a broader one asks the index for its best matching
        candidates, and is scanned exactly when fewer than ``k`` of them pass.
        """
        import numpy as np

        count = len(ids) if chosen is None else len(chosen)
        if query.shape != matrix.shape[1:]:  # the scan says what is wrong, as before
            return chosen
        if not self._ann.wanted(count):
            if 0 < self._ann.above <= count and not ann_available():
                _hint_once(count)
            return chosen
        named, order, sorted_ids = self._vector_order(embedder, ids)
        allowed = None if chosen is None else named[chosen]
        found = self._ann.candidates(embedder, matrix, ids, order, query,
                                     max(4 * k, _FETCH), allowed, wait=wait)
        if found is None:
            return chosen
        at = np.minimum(np.searchsorted(sorted_ids, found), len(sorted_ids) - 1)
        current = sorted_ids[at] == found  # the matrix's ids are the store's current chunks
        rows: npt.NDArray[np.intp] = order[at[current]]
        if len(rows) < min(k, count):
            return chosen
        return rows

    def prepare_vector_index(self, embedder: str, norm: VectorNorm | None = None) -> bool:
        """Build the approximate index of ``embedder``'s vectors now (a search otherwise
        builds it in a thread and scans meanwhile); whether the store has one.

        Why: a long-running server, a benchmark or a test wants searches that use it
        from the first one.
        """
        import numpy as np

        matrix, ids = self._vector_matrix(embedder, norm or ANY_NORM)
        if not ids or not self._ann.wanted(len(ids)):
            return False
        query = np.zeros(matrix.shape[1], dtype=np.float32)
        return self._rows_to_score(embedder, matrix, ids, query, 1, None, wait=True) is not None

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
