"""What both record stores do with rows once fetched: records in, rows out, and their shaping.

The SQLite and PostgreSQL stores share one logical schema and differ in SQL
only, so a row read from either means the same; each store keeps its queries
and hands the rows it fetched to these functions.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from kbsync.core.plan import StoredDocument
from kbsync.core.stopwords import STOPWORDS
from kbsync.model import SourceStat, Validators
from kbsync.store import DocumentText, Hit, RunRecord
from kbsync.store.sql.fragments import CURRENT, DIMENSION_PREFIX

__all__ = [
    "CURRENT",
    "DIMENSION_PREFIX",
    "HELD_PREFIX",
    "HIT_COLUMNS",
    "INDEXED",
    "MANIFEST_COLUMNS",
    "as_hit",
    "by_text_key",
    "document_text",
    "erased",
    "held_meta_name",
    "query_terms",
    "run_record",
    "stat_row",
    "stored_document",
    "validator_row",
    "window_span",
]

HELD_PREFIX = "held-version "
"""Prefix of the store's meta entries that hold a replacement awaiting confirmation."""


def held_meta_name(source: str, key: str) -> str:
    """The store's meta entry that holds the text hash of a replacement awaiting confirmation.

    It names the document, so erasing the document removes it too.
    """
    return HELD_PREFIX + json.dumps([source, key], ensure_ascii=False)


# A chunk that is in the index: not boilerplate of its source.
INDEXED = (
    "NOT EXISTS (SELECT 1 FROM boilerplate b WHERE b.source = d.source AND b.digest = c.digest)"
)
# The columns :func:`stored_document` reads, in its order (from ``documents``).
MANIFEST_COLUMNS = ("key, size, mtime_ns, inode, bytes_hash, text_hash, derivation, title, "
                    "metadata, generation, etag, last_modified, missing, racy")
# The columns :func:`hit` reads, in its order (``t``: chunk_texts).
HIT_COLUMNS = ('d.source, d.key, d.title, c.heading, c.idx, c.start, c."end", c.digest, t.text, '
               "c.tokens")


def stored_document(r: Sequence[Any]) -> StoredDocument:
    """A document as stored, from a row of :data:`MANIFEST_COLUMNS`, without chunk digests."""
    stat = None if r[1] is None else SourceStat(r[1], r[2], r[3], bool(r[13]))
    validators = None if r[10] is None and r[11] is None else Validators(r[10], r[11])
    return StoredDocument(key=r[0], stat=stat, bytes_hash=r[4], text_hash=r[5],
                          derivation=r[6], title=r[7], metadata=r[8], generation=r[9],
                          chunk_digests=(), validators=validators, missing=r[12])


def validator_row(validators: Validators | None) -> tuple[str | None, str | None]:
    """The ``etag`` and ``last_modified`` columns of ``validators``."""
    if validators is None:
        return (None, None)
    return (validators.etag, validators.last_modified)


def stat_row(stat: SourceStat | None) -> tuple[int | None, int | None, int | None, bool]:
    """The ``size``, ``mtime_ns``, ``inode`` and ``racy`` columns of ``stat``.

    ``racy`` is what keeps a stat taken too close to its listing from letting the
    next sync skip the document (:class:`~kbsync.model.SourceStat`).
    """
    if stat is None:
        return (None, None, None, False)
    return (stat.size, stat.mtime_ns, stat.inode, stat.racy)


def run_record(r: Sequence[Any]) -> RunRecord:
    """A recorded run from an (id, started, finished, report) row."""
    return RunRecord(int(r[0]), r[1], r[2], json.loads(r[3]))


def erased(rows: Iterable[Sequence[Any]], pattern: str) -> list[tuple[str, str]]:
    """The (source, key) rows whose key matches the shell-style ``pattern``, in their order."""
    return [(s, k) for s, k in rows if fnmatch.fnmatchcase(k, pattern)]


def query_terms(query: str) -> list[str]:
    """Query words for full-text search; function words go unless nothing else is left."""
    words: list[str] = re.findall(r"\w+", query.lower())
    content = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(content or words))


def document_text(row: Sequence[Any]) -> DocumentText:
    """The :class:`~kbsync.store.DocumentText` of a row of source, key, title, text, previous
    text, generation, last change, moved from, moved and the stored metadata (JSON)."""
    try:
        metadata = json.loads(row[9]) if row[9] else {}
    except ValueError:  # a damaged value: verify says so; the text is still worth reading
        metadata = {}
    return DocumentText(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8],
                        metadata=metadata if isinstance(metadata, dict) else {})


def as_hit(r: Sequence[Any], score: float) -> Hit:
    """A search result from a row of :data:`HIT_COLUMNS`: the chunk is its own context."""
    return Hit(source=r[0], key=r[1], title=r[2], heading=r[3], index=r[4], start=r[5],
               end=r[6], digest=r[7], text=r[8], score=score, context=r[8],
               context_tokens=r[9], first=r[4], last=r[4])


def window_span(rows: Sequence[Sequence[Any]], index: int, budget: int,
                taken: Collection[int] = ()) -> tuple[int, int, int] | None:
    """The first and last chunk of a context window around chunk ``index``, and its tokens.

    ``rows`` are a document's current chunks in order as (idx, start, end, tokens,
    section, ...). The window grows after, then before, alternately, within the
    chunk's section and ``budget`` tokens, and stops at a chunk in ``taken`` (one that
    an earlier result's window holds). None when ``index`` is no chunk of them.
    """
    if not 0 <= index < len(rows):
        return None
    section = rows[index][4]
    first = last = index
    tokens = rows[index][3]
    grew = True
    while grew:
        grew = False
        for step in (last + 1, first - 1):
            if 0 <= step < len(rows) and rows[step][4] == section and step not in taken \
                    and tokens + rows[step][3] <= budget:
                tokens += rows[step][3]
                first, last = min(first, step), max(last, step)
                grew = True
    return first, last, tokens


def by_text_key(text_keys: Mapping[str, bytes]) -> dict[bytes, list[str]]:
    """The digests of ``text_keys`` (digest -> its text's embedding key) by that key."""
    wanting: dict[bytes, list[str]] = {}
    for digest, key in text_keys.items():
        wanting.setdefault(key, []).append(digest)
    return wanting
