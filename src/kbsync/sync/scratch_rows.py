"""The scratch file's tables, and how listed items and stored documents become their rows
and back (:mod:`kbsync.sync.scratch`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kbsync.core.plan import StoredDocument, text_key
from kbsync.model import ItemError, SourceItem, SourceStat, Validators

__all__ = ["LISTED", "RACY", "SCHEMA", "STORED", "STORED_COLUMNS", "UNCHANGED", "listed_entry",
           "listed_row", "stored_doc", "stored_row"]

LISTED = 17
"""Columns of the ``listed`` table."""
SCHEMA = """
CREATE TABLE listed (key TEXT PRIMARY KEY, item INTEGER NOT NULL, locator TEXT,
                     media_type TEXT, size INTEGER, mtime_ns INTEGER, inode INTEGER,
                     validated INTEGER, etag TEXT, last_modified TEXT, not_modified INTEGER,
                     derivation TEXT, message TEXT, missing INTEGER,
                     source_metadata TEXT, renamed_from TEXT, racy INTEGER) WITHOUT ROWID;
CREATE TABLE stored (key TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, inode INTEGER,
                     bytes_hash TEXT, text_hash TEXT, derivation TEXT, title TEXT,
                     metadata TEXT, generation INTEGER, etag TEXT, last_modified TEXT,
                     missing INTEGER, text_key TEXT NOT NULL, racy INTEGER,
                     gone INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE TABLE origins (text_key TEXT, key TEXT, PRIMARY KEY (text_key, key)) WITHOUT ROWID;
CREATE TABLE observed (key TEXT PRIMARY KEY, size INTEGER NOT NULL,
                       rechunked INTEGER NOT NULL, at INTEGER NOT NULL,
                       text_key TEXT, renamed_from TEXT, origin TEXT) WITHOUT ROWID;
-- Filled only when the bill of a sync is checked chunk by chunk (Scratch.fresh_chunks).
CREATE TABLE fresh (digest TEXT PRIMARY KEY, tokens INTEGER NOT NULL,
                    embedding_key BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE members (grp TEXT, key TEXT, PRIMARY KEY (grp, key)) WITHOUT ROWID;
CREATE TABLE occurrences (digest TEXT, grp TEXT, key TEXT,
                          PRIMARY KEY (digest, grp, key)) WITHOUT ROWID;
"""


# A listed item the stat gate passes (same derivation, and a 304 or the same stat, racy
# on neither side: kbsync.sync.observe.stat_gate_passes) and that brings nothing new
# (its validators, if any, are the stored ones; no missing count to clear). Never NULL,
# so that NOT of it is what it says.
UNCHANGED = """coalesce(l.item AND s.derivation = l.derivation AND s.missing = 0
    AND (l.not_modified OR (l.size = s.size AND l.mtime_ns = s.mtime_ns AND l.inode IS s.inode
                            AND NOT l.racy AND NOT s.racy))
    AND (NOT l.validated OR ((s.etag IS NOT NULL OR s.last_modified IS NOT NULL)
                             AND s.etag IS l.etag AND s.last_modified IS l.last_modified)),
    0)"""
# A listed item the stat gate would pass but for a racy mark on either side: read again
# only because its modification time was too close to a listing (the stored one or this
# one) to tell a later write in the same timestamp tick from none.
RACY = """coalesce(l.item AND s.derivation = l.derivation AND s.missing = 0
    AND NOT l.not_modified AND l.size = s.size AND l.mtime_ns = s.mtime_ns
    AND l.inode IS s.inode AND (l.racy OR s.racy), 0)"""
STORED = ("s.key, s.size, s.mtime_ns, s.inode, s.bytes_hash, s.text_hash, s.derivation, "
           "s.title, s.metadata, s.generation, s.etag, s.last_modified, s.missing, s.racy")
STORED_COLUMNS = 16
"""Columns of the ``stored`` table."""


def stored_row(d: StoredDocument) -> tuple[Any, ...]:
    stat, v = d.stat, d.validators
    return (d.key, *((None, None, None) if stat is None else (stat.size, stat.mtime_ns,
                                                              stat.inode)),
            d.bytes_hash, d.text_hash, d.derivation, d.title, d.metadata, d.generation,
            *((None, None) if v is None else (v.etag, v.last_modified)), d.missing,
            text_key(d), None if stat is None else stat.racy, 0)


def stored_doc(r: Sequence[Any]) -> StoredDocument:
    """A stored document from the columns of :data:`STORED`."""
    return StoredDocument(
        key=r[0], stat=None if r[1] is None else SourceStat(r[1], r[2], r[3], bool(r[13])),
        bytes_hash=r[4], text_hash=r[5], derivation=r[6], title=r[7], metadata=r[8],
        generation=r[9], chunk_digests=(),
        validators=None if r[10] is None and r[11] is None else Validators(r[10], r[11]),
        missing=r[12])


def listed_row(entry: SourceItem | ItemError, derivation: str) -> tuple[Any, ...]:
    if isinstance(entry, ItemError):
        return (entry.key, 0, *(None,) * 10, entry.message, entry.missing, None, None, None)
    stat, v = entry.stat, entry.validators
    return (entry.key, 1, entry.locator, entry.media_type,
            *((None, None, None) if stat is None else (stat.size, stat.mtime_ns, stat.inode)),
            v is not None, *((None, None) if v is None else (v.etag, v.last_modified)),
            entry.not_modified, derivation, None, None,
            json.dumps(entry.metadata) if entry.metadata else None, entry.renamed_from,
            None if stat is None else stat.racy)


def listed_entry(r: Sequence[Any]) -> SourceItem | ItemError:
    """A listed entry from a row of the ``listed`` table."""
    if not r[1]:
        return ItemError(r[0], r[12], missing=bool(r[13]))
    return SourceItem(key=r[0], locator=r[2], media_type=r[3],
                      stat=None if r[4] is None else SourceStat(r[4], r[5], r[6], bool(r[16])),
                      validators=Validators(r[8], r[9]) if r[7] else None,
                      not_modified=bool(r[10]),
                      metadata=tuple((str(k), str(v)) for k, v in json.loads(r[14]))
                      if r[14] else (), renamed_from=r[15])
