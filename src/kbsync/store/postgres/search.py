"""Search: full text (tsvector, ts_rank), vector search (pgvector HNSW or exact), windows."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import ChunkRef, Hit, Nearest, Window
from kbsync.store.filters import Filters, postgres_condition
from kbsync.store.postgres.connection import PostgresBase, scalar
from kbsync.store.postgres.schema import HEADING_WEIGHT, HNSW_MAX_DIMENSION
from kbsync.store.rows import CURRENT, HIT_COLUMNS, INDEXED, as_hit, query_terms, window_span
from kbsync.store.values import sound_sql

__all__ = ["SearchTables"]


# A filtered vector search over at most this many chunks compares each of them (exact,
# and quicker than the index then); a broader filter walks the HNSW index with the
# filter applied to its candidates, asking for more until enough match.
_EXACT_FILTERED_CHUNKS = 20_000


class SearchTables(PostgresBase):
    """The :class:`~kbsync.store.SearchIndex` role of the PostgreSQL store."""

    def search_text(self, query: str, k: int, filters: Filters | None = None) -> list[Hit]:
        terms = query_terms(query)
        if not terms:
            return []
        where, args = postgres_condition(filters) if filters else ("TRUE", [])
        tsquery = " || ".join(["plainto_tsquery('english', %s)"] * len(terms))
        # The document's title joins the section heading (as in the SQLite store).
        heading = (f"setweight(to_tsvector('english', coalesce(d.title, '') || ' ' || "
                   f"coalesce(c.heading, '')), '{HEADING_WEIGHT}')")
        rows = self._conn.execute(
            f"SELECT {HIT_COLUMNS}, ts_rank({heading} || t.tsv, x.q) AS rank "
            f"FROM (SELECT {tsquery} AS q) x "
            "JOIN chunk_texts t ON t.tsv @@ x.q JOIN chunks c ON c.digest = t.digest "
            f"JOIN documents d ON {CURRENT} WHERE {INDEXED} AND {where} "
            "ORDER BY rank DESC, d.source, d.key, c.idx LIMIT %s",
            (*terms, *args, k),
        ).fetchall()
        return [as_hit(r, score=float(r[10])) for r in rows]

    def search_vector(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                      filters: Filters | None = None, norm: VectorNorm | None = None,
                      ) -> Nearest:
        # One vector's dimension stands for the embedder's (verify checks they agree).
        dims = self._conn.execute(
            "SELECT dimension FROM embeddings WHERE embedder = %s LIMIT 1", (embedder,)
        ).fetchall()
        query = np.asarray(vector, dtype=np.float32)
        if [r[0] for r in dims] != [query.shape[0]]:
            return Nearest([])
        norm = norm or ANY_NORM
        n = int(query.shape[0])
        typed = f"vector::vector({n})" if n <= HNSW_MAX_DIMENSION else "vector"
        cast = f"::vector({n})" if n <= HNSW_MAX_DIMENSION else "::vector"
        where, args = "TRUE", list[object]()
        if filters:
            where, args = postgres_condition(filters)
            # Without an index (below ann_above) every matching chunk is compared: one scan,
            # where candidates filtered afterwards would scan again for each retry.
            if not self._has_index(f"embeddings_hnsw_{n}") or scalar(
                    self._conn, f"SELECT count(*) FROM documents d JOIN chunks c "
                                f"ON {CURRENT} WHERE {where}", args) <= _EXACT_FILTERED_CHUNKS:
                return self._filtered_nearest(embedder, query, k, where, args, typed, cast,
                                              norm)
        # Nearest cached vectors first, from the index alone (a join would hide the index
        # from the planner); then the chunks they belong to, if current and not
        # boilerplate (and, filtered, of a matching document). Cache entries of no such
        # chunk can crowd the candidates out, so too few hits means asking again for
        # more, up to every vector (exact). A damaged vector (not of the embedder's norm)
        # is among the candidates when it would rank, and is left out of the hits then:
        # its norm is computed for the candidates only, not for every vector.
        candidates = 4 * k + 40
        sound = sound_sql(norm, "e.norm")
        while True:
            with self._transaction():
                self._conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                self._conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, candidates)}")
                rows = self._conn.execute(
                    f"WITH near AS MATERIALIZED (SELECT digest, {typed} <#> %s{cast} AS distance, "
                    "vector_norm(vector) AS norm "
                    f"FROM embeddings WHERE embedder = %s AND dimension = {n} "
                    "ORDER BY distance LIMIT %s) "
                    f"SELECT {HIT_COLUMNS}, e.distance, {sound} AS sound, "
                    f"count(*) FILTER (WHERE NOT {sound}) OVER () FROM near e "
                    "JOIN chunks c ON c.digest = e.digest "
                    f"JOIN documents d ON {CURRENT} JOIN chunk_texts t ON t.digest = c.digest "
                    f"WHERE {INDEXED} AND {where} "
                    "ORDER BY sound DESC, e.distance, d.source, d.key, c.idx LIMIT %s",
                    (query, embedder, candidates, *args, k),
                ).fetchall()
                hits = [as_hit(r, score=-float(r[10])) for r in rows if r[11]]
                total = len(hits) >= k or scalar(
                    self._conn, "SELECT count(*) <= %s FROM embeddings WHERE embedder = %s",
                    (candidates, embedder))
            if total:
                break
            candidates *= 4
        # <#> is the negated inner product; the score is the inner product, as SQLite's.
        return Nearest(hits, int(rows[0][12]) if rows else 0)

    def _filtered_nearest(self, embedder: str, query: npt.NDArray[np.float32], k: int,
                          where: str, args: Sequence[object], typed: str, cast: str,
                          norm: VectorNorm) -> Nearest:
        """The nearest vectors among the chunks of documents meeting ``where``, exactly.

        The matching documents are found first and only their chunks' vectors are
        compared, so a narrow filter loses nothing to the best of the others (an
        index scan then filtered would) and costs a scan of those chunks only. Damaged
        vectors (not of the embedder's norm) sort last, and are counted.
        """
        n = int(query.shape[0])
        sound = sound_sql(norm, "vector_norm(e.vector)")
        # Ranked by ids and distances only, then joined to the texts of the k best: carrying
        # every matching chunk's text (and vector) through the sort and the count made a
        # search of 10,000 matching chunks of 100,000 take 0.4 to 0.5 s.
        rows = self._conn.execute(
            f"SELECT {HIT_COLUMNS}, n.distance, n.sound, n.unsound FROM (SELECT m.*, "
            "count(*) FILTER (WHERE NOT m.sound) OVER () AS unsound FROM (SELECT c.id AS chunk, "
            f"d.source, d.key, c.idx, e.{typed} <#> %s{cast} AS distance, {sound} AS sound "
            f"FROM documents d JOIN chunks c ON {CURRENT} JOIN embeddings e "
            f"ON e.digest = c.digest AND e.embedder = %s AND e.dimension = {n} "
            f"WHERE {INDEXED} AND {where} "
            # OFFSET 0: not flattened, so the distances, not the vectors, reach the count.
            "AND EXISTS (SELECT 1 FROM chunk_texts t WHERE t.digest = c.digest) OFFSET 0) m "
            "ORDER BY m.sound DESC, m.distance, m.source, m.key, m.idx LIMIT %s) n "
            "JOIN chunks c ON c.id = n.chunk JOIN documents d ON d.id = c.doc_id "
            "JOIN chunk_texts t ON t.digest = c.digest "
            "ORDER BY n.sound DESC, n.distance, d.source, d.key, c.idx",
            (query, embedder, *args, k),
        ).fetchall()
        return Nearest([as_hit(r, score=-float(r[10])) for r in rows if r[11]],
                       int(rows[0][12]) if rows else 0)

    def hits_at(self, refs: Sequence[tuple[str, str, int, str]],
                scores: Sequence[float]) -> list[Hit]:
        if not refs:
            return []
        rows = {(r[0], r[1], r[4], r[7]): r for r in self._conn.execute(
            f"SELECT {HIT_COLUMNS} FROM unnest(%s::text[], %s::text[], %s::int[], %s::text[]) "
            "AS q(source, key, idx, digest) JOIN documents d ON d.source = q.source "
            f"AND d.key = q.key JOIN chunks c ON {CURRENT} AND c.idx = q.idx "
            f"AND c.digest = q.digest JOIN chunk_texts t ON t.digest = c.digest WHERE {INDEXED}",
            ([r[0] for r in refs], [r[1] for r in refs], [r[2] for r in refs],
             [r[3] for r in refs]))}
        return [as_hit(rows[ref], score=score) for ref, score in zip(refs, scores, strict=True)
                if ref in rows]

    def indexed_chunks(self, source: str | None = None, key: str | None = None,
                       filters: Filters | None = None) -> Iterator[ChunkRef]:
        sql = (f"SELECT d.source, d.key, c.idx, c.digest, c.heading, c.start, c.\"end\" "
               f"FROM documents d JOIN chunks c ON {CURRENT} WHERE {INDEXED}")
        args: list[object] = []
        for column, value in (("source", source), ("key", key)):
            if value is not None:
                sql += f" AND d.{column} = %s"
                args.append(value)
        if filters:
            where, more = postgres_condition(filters)
            sql += f" AND {where}"
            args += more
        for row in self._conn.execute(sql + " ORDER BY d.source, d.key, c.idx",
                                      args).fetchall():
            yield ChunkRef(*row)

    def window(self, hit: Hit, budget: int, taken: Collection[int] = ()) -> Window:
        rows = self._conn.execute(
            "SELECT c.idx, c.start, c.\"end\", c.tokens, c.section FROM documents d "
            f"JOIN chunks c ON {CURRENT} WHERE d.source = %s AND d.key = %s ORDER BY c.idx",
            (hit.source, hit.key),
        ).fetchall()
        span = window_span(rows, hit.index, budget, taken)
        if span is None:
            return Window(hit.index, hit.index, hit.text, 0)
        first, last, tokens = span
        start, end = rows[first][1], rows[last][2]
        text = self._conn.execute(
            "SELECT substr(t.text, %s, %s) FROM documents d JOIN texts t ON t.doc_id = d.id "
            "WHERE d.source = %s AND d.key = %s",
            (start + 1, end - start, hit.source, hit.key)).fetchone()
        return Window(first, last, str(text[0]) if text else hit.text, tokens)
