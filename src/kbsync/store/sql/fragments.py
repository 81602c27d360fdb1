"""Pieces of SQL that the queries of every SQL store share, and the names of meta entries.

A module with no imports of its own: a status reads the store through these alone, without
the SQL core's roles (:mod:`kbsync.store.sql.status`).
"""

from __future__ import annotations

__all__ = ["CURRENT", "DIMENSION_PREFIX"]

# The current generation of a document's chunks (``d``: documents, ``c``: chunks).
CURRENT = "c.doc_id = d.id AND c.generation = d.generation"

DIMENSION_PREFIX = "dimension "
"""Prefix of the store's meta entries that name each embedder's dimension: a sync asks
for it every run, and grouping every vector to find it grows with the store."""
