"""The invariants of the record stores' logical schema, checked by both stores' verify.

The SQLite and PostgreSQL stores share the schema, and these queries are
plain SQL both run alike; a store hands in how it runs a query and its
driver's parameter marker. What only one store can break (SQLite's full-text
table drifting from the chunks) it checks itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kbsync.store.rows import CURRENT, INDEXED

__all__ = ["Query", "problems"]

# Runs one query with its parameters and returns its rows.
Query = Callable[[str, Sequence[Any]], Iterable[Sequence[Any]]]


def problems(query: Query, embedder: str, *, mark: str, bad_vectors: str) -> list[str]:
    """Every shared invariant checked; the problems found, as lines for a person to read.

    ``mark`` is the driver's parameter marker (``?`` or ``%s``); ``bad_vectors``
    is the store's query counting vectors whose size is not their recorded
    dimension (how a vector's size is read differs between the stores). What the rows
    hold (texts against their digests, vectors against their norm) is checked by
    :mod:`kbsync.store.values`.
    """
    found: list[str] = []
    for source, key, generation, gens, max_gen in query(
        "SELECT d.source, d.key, d.generation, count(DISTINCT c.generation), "
        "max(c.generation) FROM documents d LEFT JOIN chunks c ON c.doc_id = d.id "
        "GROUP BY d.id ORDER BY d.id", ()
    ):
        if gens > 2:
            found.append(f"{source}:{key}: {gens} chunk generations (at most 2 allowed)")
        if max_gen is not None and max_gen > generation:
            found.append(f"{source}:{key}: chunks of generation {max_gen} beyond the "
                         f"current {generation}")
    for source, key, n, top in query(
        f"SELECT d.source, d.key, count(c.id), max(c.idx) FROM documents d "
        f"JOIN chunks c ON {CURRENT} GROUP BY d.id ORDER BY d.id", ()
    ):
        if top != n - 1:
            found.append(f"{source}:{key}: chunk indexes are not 0..{n - 1}")
    for (digest,) in query(
        "SELECT DISTINCT c.digest FROM chunks c LEFT JOIN chunk_texts t USING (digest) "
        "WHERE t.digest IS NULL", ()
    ):
        found.append(f"chunk {digest[:12]}: text missing")
    for source, key, digest in query(
        f"SELECT d.source, d.key, c.digest FROM documents d JOIN chunks c ON {CURRENT} "
        f"LEFT JOIN embeddings e ON e.digest = c.digest AND e.embedder = {mark} "
        f"WHERE e.digest IS NULL AND {INDEXED}",
        (embedder,),
    ):
        found.append(f"{source}:{key}: chunk {digest[:12]} has no vector")
    for emb, dims in query(
        "SELECT embedder, count(DISTINCT dimension) FROM embeddings GROUP BY embedder", ()
    ):
        if dims != 1:
            found.append(f"embedder {emb}: vectors of {dims} different dimensions")
    for (bad,) in query(bad_vectors, ()):
        if bad:
            found.append(f"{bad} vectors whose size does not match their dimension")
    for (orphans,) in query(
        "SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)", ()
    ):
        if orphans:
            found.append(f"{orphans} chunks of no document")
    return found
