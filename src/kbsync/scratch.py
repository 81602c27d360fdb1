"""A sync's scratch database: what it learns of one source, on disk instead of in memory.

A sync needs, for every document of a source, its listed item, its stored
record, what reading it came to and the digests of its chunks (for boilerplate
detection). Held in memory these grow with the source (2.6 KB a file before
this module); here they are rows of a SQLite file read back a page at a time,
in key order, so memory stays flat whatever the size of the source.

The file is temporary: created in the state directory (or the system's
temporary one), unlinked as soon as it is open where the system allows it, so
that nothing is left behind whatever ends the process, and never synced to disk
(there is nothing to recover). Every query walks a primary key in its order, so
SQLite never sorts into temporary files of its own outside that directory.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kbsync.model import ItemError, SourceItem
from kbsync.plan import (
    DocumentVersion,
    Observation,
    StoredDocument,
    boilerplate_of_counts,
    host_group,
)

__all__ = ["Scratch", "text_key"]

_PAGE = 512
_SCHEMA = """
CREATE TABLE listed (key TEXT PRIMARY KEY, entry BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE stored (key TEXT PRIMARY KEY, doc BLOB NOT NULL, text_key TEXT NOT NULL,
                     gone INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE TABLE origins (text_key TEXT, key TEXT, PRIMARY KEY (text_key, key)) WITHOUT ROWID;
CREATE TABLE observed (key TEXT PRIMARY KEY, entry BLOB NOT NULL, size INTEGER NOT NULL,
                       rechunked INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE members (grp TEXT, key TEXT, PRIMARY KEY (grp, key)) WITHOUT ROWID;
CREATE TABLE occurrences (digest TEXT, grp TEXT, key TEXT, fresh INTEGER NOT NULL,
                          PRIMARY KEY (digest, grp, key)) WITHOUT ROWID;
"""


def text_key(doc: StoredDocument | DocumentVersion) -> str:
    """What a renamed document shares with its origin (as :func:`kbsync.plan.plan` matches)."""
    return doc.text_hash + "|" + doc.derivation


class Scratch:
    """One source's listing, manifest, observations and chunk counts, in a temporary SQLite file."""

    def __init__(self, folder: Path | None) -> None:
        fd, name = tempfile.mkstemp(prefix="kbsync-scratch-", suffix=".db", dir=folder)
        os.close(fd)
        self._path: str | None = name
        self._db = sqlite3.connect(name, isolation_level=None)
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute("PRAGMA locking_mode = EXCLUSIVE")
        self._db.execute("PRAGMA cache_size = -8192")  # 8 MB: the bound on memory
        self._db.executescript(_SCHEMA)
        with contextlib.suppress(OSError):  # where an open file cannot be unlinked: at close
            os.unlink(name)
            self._path = None
        self._db.execute("BEGIN")  # one transaction for the whole life: no commit costs

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._path)

    # -- the listing and the manifest --------------------------------------------------

    def add_listed(self, entry: SourceItem | ItemError) -> None:
        """Note a listed item, or a document the listing could not take (an item wins)."""
        self._db.execute(
            "INSERT INTO listed (key, entry) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
            "SET entry = excluded.entry WHERE ?",
            (entry.key, _dumps(entry), isinstance(entry, SourceItem)))

    def add_stored(self, docs: Iterable[StoredDocument]) -> None:
        """Note documents of the store's manifest."""
        self._db.executemany(
            "INSERT OR REPLACE INTO stored (key, doc, text_key) VALUES (?, ?, ?)",
            ((d.key, _dumps(d), text_key(d)) for d in docs))

    def listed_count(self) -> int:
        return self._count("SELECT count(*) FROM listed")

    def stored_count(self) -> int:
        return self._count("SELECT count(*) FROM stored")

    def listing(self) -> Iterator[tuple[SourceItem | ItemError, StoredDocument | None]]:
        """Each listed entry in key order, with the stored document of its key, if any."""
        for key, entry, doc in self._pages(
                "SELECT l.key, l.entry, s.doc FROM listed l LEFT JOIN stored s ON s.key = l.key "
                "WHERE l.key > ? ORDER BY l.key LIMIT ?"):
            del key
            yield pickle.loads(entry), None if doc is None else pickle.loads(doc)

    def vanish(self) -> int:
        """Mark every stored document the listing lacks as gone; how many there are.

        Gone documents are offered as origins of moves until one is taken.
        """
        self._db.execute("UPDATE stored SET gone = 1 WHERE NOT EXISTS "
                         "(SELECT 1 FROM listed l WHERE l.key = stored.key)")
        self._db.execute("INSERT INTO origins (text_key, key) "
                         "SELECT text_key, key FROM stored WHERE gone")
        return self.gone_count()

    # -- what reading came to ------------------------------------------------------------

    def observe(self, observation: Observation, old: StoredDocument | None) -> None:
        """Keep a document's observation (not an unchanged one) until its batch."""
        data = _dumps((observation, old))
        rechunked = isinstance(observation, DocumentVersion) and observation.rechunked
        self._db.execute("INSERT INTO observed (key, entry, size, rechunked) VALUES (?, ?, ?, ?)",
                         (observation.key, data, len(data), rechunked))
        if rechunked:
            assert isinstance(observation, DocumentVersion)
            self._count_document(observation.key, (c.digest for c in observation.chunks), fresh=1)

    def batches(self, documents: int, size_limit: int,
                ) -> Iterator[list[tuple[Observation, StoredDocument | None]]]:
        """The observations in key order, cut at ``documents`` or ``size_limit`` bytes of them."""
        batch: list[tuple[Observation, StoredDocument | None]] = []
        size = 0
        for _, entry, length in self._pages(
                "SELECT key, entry, size FROM observed WHERE key > ? ORDER BY key LIMIT ?"):
            batch.append(pickle.loads(entry))
            size += length
            if len(batch) >= documents or size >= size_limit:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    # -- boilerplate ---------------------------------------------------------------------

    def count_stored(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Count the store's (key, digest) pairs of documents this sync keeps as they are."""
        self._db.executemany(
            "INSERT OR IGNORE INTO occurrences (digest, grp, key, fresh) SELECT ?1, ?2, ?3, 0 "
            "WHERE NOT EXISTS (SELECT 1 FROM observed WHERE key = ?3 AND rechunked) "
            "AND NOT EXISTS (SELECT 1 FROM stored WHERE key = ?3 AND gone)",
            ((digest, host_group(key), key) for key, digest in pairs))
        self._db.execute("INSERT OR IGNORE INTO members (grp, key) "
                         "SELECT grp, key FROM occurrences WHERE NOT fresh")

    def boilerplate(self, share: float) -> frozenset[str]:
        """:func:`kbsync.plan.boilerplate` of every counted document."""
        members = dict(self._db.execute("SELECT grp, count(*) FROM members GROUP BY grp"))
        counts = self._db.execute("SELECT grp, digest, count(*) FROM occurrences "
                                  "GROUP BY digest, grp HAVING count(*) > 1")
        return boilerplate_of_counts(counts, members, share)

    def recurring(self) -> set[str]:
        """Digests that more than one re-chunked document holds."""
        return {r[0] for r in self._db.execute(
            "SELECT digest FROM occurrences WHERE fresh GROUP BY digest HAVING count(*) > 1")}

    def rechunked_count(self) -> int:
        return self._count("SELECT count(*) FROM observed WHERE rechunked")

    # -- moves and deletions -------------------------------------------------------------

    def origins(self, text_keys: Sequence[str]) -> list[StoredDocument]:
        """Gone documents not yet moved with any of these texts, by text then key."""
        found: dict[str, StoredDocument] = {}
        for tk in dict.fromkeys(text_keys):
            for (doc,) in self._db.execute(
                    "SELECT s.doc FROM origins o JOIN stored s ON s.key = o.key "
                    "WHERE o.text_key = ? ORDER BY o.key", (tk,)):
                stored: StoredDocument = pickle.loads(doc)
                found.setdefault(stored.key, stored)
        return list(found.values())

    def moved(self, docs: Iterable[StoredDocument]) -> None:
        """These gone documents moved to a new key: no longer origins, not to be deleted."""
        for d in docs:
            self._db.execute("DELETE FROM origins WHERE text_key = ? AND key = ?",
                             (text_key(d), d.key))
            self._db.execute("UPDATE stored SET gone = 0 WHERE key = ?", (d.key,))

    def gone_count(self) -> int:
        return self._count("SELECT count(*) FROM stored WHERE gone")

    def gone(self, page: int) -> Iterator[list[StoredDocument]]:
        """The gone documents that no move took, in key order, ``page`` at a time."""
        batch: list[StoredDocument] = []
        for _, doc in self._pages("SELECT key, doc FROM stored WHERE gone AND key > ? "
                                  "ORDER BY key LIMIT ?"):
            batch.append(pickle.loads(doc))
            if len(batch) >= page:
                yield batch
                batch = []
        if batch:
            yield batch

    # -- internals -----------------------------------------------------------------------

    def _count_document(self, key: str, digests: Iterable[str], fresh: int) -> None:
        group = host_group(key)
        self._db.execute("INSERT OR IGNORE INTO members (grp, key) VALUES (?, ?)", (group, key))
        self._db.executemany(
            "INSERT OR IGNORE INTO occurrences (digest, grp, key, fresh) VALUES (?, ?, ?, ?)",
            ((d, group, key, fresh) for d in digests))

    def _count(self, sql: str) -> int:
        return int(self._db.execute(sql).fetchone()[0])

    def _pages(self, sql: str) -> Iterator[tuple[Any, ...]]:
        """Rows of ``sql`` (``key > ? … LIMIT ?``, key first) a page at a time.

        Pages rather than one open cursor, so that the caller may write to the
        scratch database between rows.
        """
        after = ""
        while True:
            rows = self._db.execute(sql, (after, _PAGE)).fetchall()
            yield from rows
            if len(rows) < _PAGE:
                return
            after = rows[-1][0]


def _dumps(value: object) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
