"""The SQL core: every role of :class:`~kbsync.store.RecordStore` but search, written once over a
:class:`~kbsync.store.sql.dialect.Dialect`.

SQL stores share one logical schema (``documents``, ``chunks``, ``chunk_texts``,
``embeddings``, ``meta``, ``runs``, ``boilerplate``, ``frontier``, ``schedules``,
``moves``, ``outbox``, ``erasures``, and the kept texts in ``versions`` unless the
backend keeps them its own way), so the manifest, the embedding cache, the document
writes of a plan, erasures, runs, meta and their crash points are the same code for
each. A backend is one folder: its dialect, its schema and how it opens; its search;
and what is truly its own, behind the hooks of :class:`~kbsync.store.sql.base.SqlBase`
(SQLite's full-text rows and big texts, PostgreSQL's pipelining, vector indexes, text
rows and work queue). Its store class lists its own mixins first and :class:`SqlStore`
last, so that what it overrides wins.

The modules, one role each: :mod:`~kbsync.store.sql.records` (meta, runs, erasure
tombstones), :mod:`~kbsync.store.sql.manifest` (the manifest's reads, boilerplate,
frontier, schedules, the outbox), :mod:`~kbsync.store.sql.embeddings` (the embedding
cache), :mod:`~kbsync.store.sql.documents` (a plan's writes, grouped by kind, and the
kept texts), :mod:`~kbsync.store.sql.maintenance` (status, gc, erase) and
:mod:`~kbsync.store.sql.checks` (verify), gathered by :mod:`~kbsync.store.sql.store`; a
status's counts are :mod:`~kbsync.store.sql.status`. Each name here is imported on first
use, so that a status that reads through a dialect imports none of the roles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsync.lazy import names_on_first_use

if TYPE_CHECKING:
    from kbsync.store.sql.base import SqlBase
    from kbsync.store.sql.dialect import Column, Dialect, Row
    from kbsync.store.sql.store import SqlStore

__all__ = ["Column", "Dialect", "Row", "SqlBase", "SqlStore"]

_HOMES = {
    "kbsync.store.sql.dialect": ("Column", "Dialect", "Row"),
    "kbsync.store.sql.base": ("SqlBase",),
    "kbsync.store.sql.store": ("SqlStore",),
}


__getattr__ = names_on_first_use(__name__, _HOMES)
"""A name of the package, imported from its module on first use."""
