"""A sync's scratch database: what it learns of one source, on disk instead of in memory.

A sync needs, for every document of a source, its listed item, its stored
record, what reading it came to and, of what it re-chunked, the digests of the
chunks (what boilerplate detection foresees, and the digests that recur). Held
in memory these grow with the source (over 1 KB a file); here they are rows of
a SQLite file read back a page at a time, in key order, so memory stays flat
whatever the size of the source.

The file is temporary: created in the state directory (or the system's
temporary one), unlinked as soon as it is open where the system allows it, and
never synced to disk (there is nothing to recover). Every query walks a primary
key in its order, so SQLite never sorts into temporary files of its own outside
that directory. A process killed between creating the file and unlinking it
leaves it behind; the creator holds an ``flock`` on it until it closes, so
:func:`remove_stale` (run when a knowledge base is opened and before each new
scratch file) deletes exactly the files whose creator is gone.
Every database or I/O error (a full disk) is a one-line ``StoreError``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import sqlite3
import tempfile
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from kbsync.core.plan import (
    DocumentVersion,
    Observation,
    StoredDocument,
    host_group,
    text_key,
)
from kbsync.model import ItemError, SourceItem
from kbsync.store.guard import guarded, sqlite_or_os_error
from kbsync.sync.scratch_rows import (
    LISTED,
    RACY,
    SCHEMA,
    STORED,
    STORED_COLUMNS,
    UNCHANGED,
    listed_entry,
    listed_row,
    stored_doc,
    stored_row,
)

__all__ = ["Facts", "Packed", "Scratch", "Waiting", "batch_chunks", "facts_of", "pack",
           "remove_stale"]

_PREFIX = "kbsync-scratch-"

_PAGE = 512


@dataclass(frozen=True, slots=True)
class Facts:
    """What deciding on a whole source needs of one observation: the digests of its chunks
    when it was re-chunked (None otherwise, for boilerplate) and their tokens (for the
    bill), and for a new document its text key and the key its source says it was
    renamed from (for moves)."""

    key: str
    digests: tuple[str, ...] | None = None
    tokens: int = 0
    text_key: str | None = None
    renamed_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data that :meth:`from_dict` reads back (what a worker sends)."""
        return {"key": self.key, "digests": None if self.digests is None else list(self.digests),
                "tokens": self.tokens, "text_key": self.text_key,
                "renamed_from": self.renamed_from}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Facts:
        digests = data.get("digests")
        return cls(str(data["key"]), None if digests is None else tuple(digests),
                   int(data.get("tokens", 0)), data.get("text_key"), data.get("renamed_from"))


def facts_of(observation: Observation, old: StoredDocument | None) -> Facts:
    """The :class:`Facts` of ``observation`` (``old``: the stored document it replaces)."""
    if not isinstance(observation, DocumentVersion):
        return Facts(observation.key)
    chunks = observation.chunks if observation.rechunked else None
    new = old is None
    return Facts(observation.key, None if chunks is None else tuple(c.digest for c in chunks),
                 0 if chunks is None else sum(c.tokens for c in chunks),
                 text_key(observation) if new else None,
                 observation.renamed_from if new else None)


class Waiting(NamedTuple):
    """An observation waiting for its batch: with the stored document it replaces, and the
    vanished one it moves from when the source's moves are decided so
    (:meth:`Scratch.decide_moves`)."""

    observation: Observation
    old: StoredDocument | None
    origin: StoredDocument | None = None


def batch_chunks(batch: Iterable[Waiting]) -> int:
    """Chunks of the documents of ``batch`` chunked in this run (its share of
    :meth:`Scratch.fresh_chunk_count`)."""
    return sum(len(w.observation.chunks) for w in batch
               if isinstance(w.observation, DocumentVersion) and w.observation.rechunked)


@dataclass(frozen=True, slots=True)
class Packed:
    """An observation pickled for the scratch file, with its :class:`Facts`.

    A reading process packs what it read, so the sync's own process only files bytes.
    """

    key: str
    blob: bytes
    facts: Facts


def pack(observation: Observation, old: StoredDocument | None) -> Packed:
    """``observation`` (and the stored document it replaces) packed for :meth:`Scratch.keep`."""
    blob = pickle.dumps((observation, old), protocol=pickle.HIGHEST_PROTOCOL)
    return Packed(observation.key, blob, facts_of(observation, old))


def remove_stale(folder: Path) -> int:
    """Delete the scratch files in ``folder`` that no live process holds; how many.

    Only a killed sync leaves one (see the module docstring); a running sync's
    is skipped, since its creator holds an ``flock`` on it.
    """
    removed = 0
    try:
        names = sorted(folder.glob(f"{_PREFIX}*.db"))
    except OSError:
        return 0
    for path in names:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path.unlink()
            removed += 1
        except OSError:  # held by a running sync, or a folder that cannot be written
            pass
        finally:
            os.close(fd)
    return removed


@guarded(lambda scratch: scratch.where, sqlite_or_os_error)
class Scratch:
    """One source's listing, manifest, observations and its re-chunked documents' digests, in a
    temporary SQLite file."""

    def __init__(self, folder: Path | None) -> None:
        where = Path(tempfile.gettempdir() if folder is None else folder)
        #: What error messages call the file (it has no name once unlinked).
        self.where = f"{where / _PREFIX}….db (the sync's scratch file)"
        remove_stale(where)
        fd, name = tempfile.mkstemp(prefix=_PREFIX, suffix=".db", dir=folder)
        self._fd: int | None = fd
        self._path: str | None = name
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # until close: not stale while this process lives
            self._db = sqlite3.connect(name, isolation_level=None)
        except BaseException:
            self._release()
            raise
        with contextlib.suppress(OSError):  # where an open file cannot be unlinked: at close
            os.unlink(name)
            self._path = None
        self._folder = folder
        self._side: IO[bytes] | None = None
        self._fresh_tokens = 0
        self._fresh_chunks = 0
        self._fresh_listed = False
        try:
            self._db.execute("PRAGMA journal_mode = OFF")
            self._db.execute("PRAGMA synchronous = OFF")
            self._db.execute("PRAGMA locking_mode = EXCLUSIVE")
            self._db.execute("PRAGMA cache_size = -8192")  # 8 MB: the bound on memory
            self._db.executescript(SCHEMA)
            self._db.execute("BEGIN")  # one transaction for the whole life: no commit costs
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._db.close()
            if self._side is not None:
                self._side.close()
        finally:
            self._release()

    def _release(self) -> None:
        """Unlink the file if it still has a name, then let go of its lock."""
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._path)
            self._path = None
        if self._fd is not None:
            os.close(self._fd)  # drops the flock
            self._fd = None

    # -- the listing and the manifest --------------------------------------------------

    def add_listed(self, entries: Iterable[tuple[SourceItem | ItemError, str]]) -> None:
        """Note listed items, each with the derivation it would be read with, and documents
        the listing could not take (with any derivation). An item wins over an error."""
        self._db.executemany(
            f"INSERT INTO listed VALUES ({', '.join('?' * LISTED)}) ON CONFLICT (key) DO UPDATE "
            "SET item = 1, locator = excluded.locator, media_type = excluded.media_type, "
            "size = excluded.size, mtime_ns = excluded.mtime_ns, inode = excluded.inode, "
            "validated = excluded.validated, etag = excluded.etag, "
            "last_modified = excluded.last_modified, not_modified = excluded.not_modified, "
            "derivation = excluded.derivation, message = NULL, missing = NULL, "
            "source_metadata = excluded.source_metadata, renamed_from = excluded.renamed_from, "
            "racy = excluded.racy WHERE excluded.item",
            (listed_row(entry, derivation) for entry, derivation in entries))

    def add_stored(self, docs: Iterable[StoredDocument]) -> None:
        """Note documents of the store's manifest."""
        self._db.executemany(
            f"INSERT OR REPLACE INTO stored VALUES ({', '.join('?' * STORED_COLUMNS)})",
                             (stored_row(d) for d in docs))

    def listed_count(self) -> int:
        return self._count("SELECT count(*) FROM listed")

    def stored_count(self) -> int:
        return self._count("SELECT count(*) FROM stored")

    def unchanged(self) -> tuple[int, int]:
        """How many listed items the stat gate passes with nothing to refresh, and their bytes.

        The same decision as :func:`kbsync.sync.unchanged_observation` after the stat
        gate, taken in one query so that unchanged documents cost no Python at all.
        """
        count, size = self._db.execute(
            "SELECT count(*), coalesce(sum(l.size), 0) FROM listed l "
            f"JOIN stored s ON s.key = l.key WHERE {UNCHANGED}").fetchone()
        return int(count), int(size)

    def racy(self) -> int:
        """How many listed items are read again only because a stat is racy (the stored
        one or the listed one): the stat gate would pass them otherwise."""
        return self._count("SELECT count(*) FROM listed l JOIN stored s ON s.key = l.key "
                           f"WHERE {RACY}")

    def listing(self, skip_unchanged: bool = True,
                ) -> Iterator[tuple[SourceItem | ItemError, StoredDocument | None]]:
        """Each listed entry in key order, with the stored document of its key, if any;
        without those :meth:`unchanged` counts, unless ``skip_unchanged`` is false."""
        for row in self._pages(
                f"SELECT l.*, {STORED} FROM listed l LEFT JOIN stored s ON s.key = l.key "
                f"WHERE l.key > ? AND NOT ({int(skip_unchanged)} AND {UNCHANGED}) "
                "ORDER BY l.key LIMIT ?"):
            yield (listed_entry(row[:LISTED]),
                   None if row[LISTED] is None else stored_doc(row[LISTED:]))

    def unlisted_count(self) -> int:
        """How many stored documents the listing lacks (without marking them gone)."""
        return self._count("SELECT count(*) FROM stored WHERE NOT EXISTS "
                           "(SELECT 1 FROM listed l WHERE l.key = stored.key)")

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
        # Pickled straight into a side file, the table keeping where: as a blob in the
        # table, a document would be held three more times (the pickle, SQLite's copy of
        # it, its pages), and rows of kilobytes make a slow b-tree.
        side = self._side_file()
        at = side.seek(0, os.SEEK_END)
        pickle.dump((observation, old), side, protocol=pickle.HIGHEST_PROTOCOL)
        self._note(facts_of(observation, old), side.tell() - at, at)

    def keep(self, packed: Packed) -> None:
        """Keep a packed observation (:func:`pack`) until its batch."""
        side = self._side_file()
        at = side.seek(0, os.SEEK_END)
        side.write(packed.blob)
        self._note(packed.facts, len(packed.blob), at)

    def note(self, facts: Facts) -> None:
        """Note what an observation kept elsewhere (a parallel run's queue) comes to: what
        deciding on the source needs, without the observation itself."""
        self._note(facts, 0, -1)

    def _note(self, facts: Facts, size: int, at: int) -> None:
        """Note an observation written at ``at`` of the side file (-1: kept elsewhere)."""
        self._db.execute("INSERT INTO observed (key, size, rechunked, at, text_key, "
                         "renamed_from) VALUES (?, ?, ?, ?, ?, ?)",
                         (facts.key, size, facts.digests is not None, at, facts.text_key,
                          facts.renamed_from))
        if facts.digests is not None:
            self._count_document(facts.key, facts.digests)
            self._fresh_tokens += facts.tokens
            self._fresh_chunks += len(facts.digests)

    def observed_count(self) -> int:
        """The documents :meth:`batches` hands out: those observed as changed."""
        return self._count("SELECT count(*) FROM observed")

    def batches(self, documents: int, size_limit: int, first: int | None = None,
                ) -> Iterator[list[Waiting]]:
        """The observations in key order, cut at ``documents`` or ``size_limit`` bytes of them;
        with ``first``, the first batch is cut at that many documents, and each next one at
        twice as many as the one before, up to ``documents``."""
        batch: list[Waiting] = []
        size = 0
        limit = documents if first is None else min(first, documents)
        side = self._side_file()
        for _, length, at, origin in self._pages(
                "SELECT key, size, at, origin FROM observed WHERE key > ? ORDER BY key LIMIT ?"):
            # Loaded from the file, not from its bytes read first: a big document is not
            # held twice.
            side.seek(at)
            observation, old = pickle.load(side)
            batch.append(Waiting(observation, old,
                                 None if origin is None else self._stored_at(origin)))
            size += length
            if len(batch) >= limit or size >= size_limit:
                yield batch
                batch, size = [], 0
                limit = min(2 * limit, documents)
        if batch:
            yield batch

    def _stored_at(self, key: str) -> StoredDocument:
        return stored_doc(self._db.execute(f"SELECT {STORED} FROM stored s WHERE key = ?",
                                           (key,)).fetchone())

    # -- boilerplate ---------------------------------------------------------------------

    def replaced(self) -> Iterator[str]:
        """The keys whose stored chunks stop counting for boilerplate: the re-chunked
        documents and the gone ones, in key order."""
        yield from (row[0] for row in self._pages(
            "SELECT key FROM observed WHERE rechunked AND key > ? ORDER BY key LIMIT ?"))
        yield from (row[0] for row in self._pages(
            "SELECT key FROM stored WHERE gone AND key > ? ORDER BY key LIMIT ?"))

    def added(self) -> Iterator[tuple[str, str, int]]:
        """(host group, digest, documents) of the chunks of the re-chunked documents, in
        digest order (the key the occurrences are kept in: nothing is sorted)."""
        yield from self._db.execute(
            "SELECT grp, digest, count(*) FROM occurrences GROUP BY digest, grp")

    def members(self) -> dict[str, int]:
        """How many re-chunked documents have chunks, by host group."""
        return dict(self._db.execute("SELECT grp, count(*) FROM members GROUP BY grp"))

    def recurring(self) -> set[str]:
        """Digests that more than one re-chunked document holds."""
        return {r[0] for r in self._db.execute(
            "SELECT digest FROM occurrences GROUP BY digest HAVING count(*) > 1")}

    def shared_fresh(self) -> Iterator[tuple[str, str]]:
        """``(key, digest)`` of each re-chunked document and each of its digests that
        another re-chunked document holds too (:meth:`recurring`), by key."""
        recurring = sorted(self.recurring())
        for start in range(0, len(recurring), _PAGE):
            page = recurring[start : start + _PAGE]
            yield from self._db.execute(
                "SELECT key, digest FROM occurrences WHERE digest IN "
                f"({', '.join('?' * len(page))})", page)

    def rechunked_count(self) -> int:
        return self._count("SELECT count(*) FROM observed WHERE rechunked")

    # -- moves and deletions -------------------------------------------------------------

    def decide_moves(self) -> int:
        """Decide which gone document each new one moved from; how many moved.

        New documents in key order, each the first gone document not yet taken with its
        exact text, else the one its source says it was renamed from: what one plan of
        the whole source decides (:func:`kbsync.core.plan.plan`), so that batches, planned
        apart, are told their origins (:meth:`batches`) and move the same documents.
        """
        if not self.gone_count():
            return 0
        moved = 0
        for key, tk, renamed in self._pages(
                "SELECT key, text_key, renamed_from FROM observed WHERE key > ? "
                "AND text_key IS NOT NULL ORDER BY key LIMIT ?"):
            taken = self.origins([tk])[:1] or self.gone_at([renamed] if renamed else [])
            if taken:
                self.moved(taken)
                self._db.execute("UPDATE observed SET origin = ? WHERE key = ?",
                                 (taken[0].key, key))
                moved += 1
        return moved

    def moves(self) -> Iterator[tuple[str, str]]:
        """``(key, origin)`` of each new document that moves (:meth:`decide_moves`)."""
        yield from self._pages("SELECT key, origin FROM observed WHERE key > ? "
                               "AND origin IS NOT NULL ORDER BY key LIMIT ?")

    def origins(self, text_keys: Sequence[str]) -> list[StoredDocument]:
        """Gone documents not yet moved with any of these texts, by text then key."""
        found: dict[str, StoredDocument] = {}
        for tk in dict.fromkeys(text_keys):
            for row in self._db.execute(
                    f"SELECT {STORED} FROM origins o JOIN stored s ON s.key = o.key "
                    "WHERE o.text_key = ? ORDER BY o.key", (tk,)):
                stored = stored_doc(row)
                found.setdefault(stored.key, stored)
        return list(found.values())

    def gone_at(self, keys: Sequence[str]) -> list[StoredDocument]:
        """The gone documents not yet moved at these keys (the origins a source names)."""
        return [stored_doc(row) for key in dict.fromkeys(keys) for row in self._db.execute(
            f"SELECT {STORED} FROM stored s WHERE key = ? AND gone", (key,))]

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
        for row in self._pages(f"SELECT {STORED} FROM stored s WHERE gone AND key > ? "
                               "ORDER BY key LIMIT ?"):
            batch.append(stored_doc(row))
            if len(batch) >= page:
                yield batch
                batch = []
        if batch:
            yield batch

    # -- internals -----------------------------------------------------------------------

    def fresh_tokens_at_most(self) -> int:
        """Tokens of the chunks of the documents chunked in this run, a chunk that several
        documents hold counted for each: at least those of :meth:`fresh_chunks`."""
        return self._fresh_tokens

    def fresh_chunk_count(self) -> int:
        """Chunks of the documents chunked in this run, a chunk that several documents hold
        counted for each: what :func:`batch_chunks` of every batch adds up to."""
        return self._fresh_chunks

    def fresh_chunks(self, observations: Iterable[Observation] | None = None,
                     ) -> Iterator[list[tuple[str, int, bytes]]]:
        """``(digest, tokens, embedding text key)`` of the distinct chunks of the documents
        chunked in this run, a page at a time; from ``observations`` when they are kept
        elsewhere (:meth:`note`), else from this file's.

        Listed from the observations on first use: only a sync whose bill may exceed its
        bound asks, so the others never pay for a table of every chunk.
        """
        if not self._fresh_listed:
            self._list_fresh(self._kept() if observations is None else observations)
        page: list[tuple[str, int, bytes]] = []
        for digest, tokens, key in self._pages(
                "SELECT digest, tokens, embedding_key FROM fresh WHERE digest > ? "
                "ORDER BY digest LIMIT ?"):
            page.append((digest, tokens, key))
            if len(page) == _PAGE:
                yield page
                page = []
        if page:
            yield page

    def _kept(self) -> Iterator[Observation]:
        side = self._side_file()
        for _, _, at in self._pages("SELECT key, size, at FROM observed "
                                    "WHERE rechunked AND key > ? ORDER BY key LIMIT ?"):
            side.seek(at)
            observation, _ = pickle.load(side)
            yield observation

    def _list_fresh(self, observations: Iterable[Observation]) -> None:
        for observation in observations:
            if isinstance(observation, DocumentVersion) and observation.rechunked:
                self._db.executemany(
                    "INSERT OR IGNORE INTO fresh (digest, tokens, embedding_key) "
                    "VALUES (?, ?, ?)",
                    ((c.digest, c.tokens, c.embedding_key) for c in observation.chunks))
        self._fresh_listed = True

    def _side_file(self) -> IO[bytes]:
        """The file big observations wait in (deleted when closed, or at once where possible)."""
        if self._side is None:
            self._side = tempfile.TemporaryFile(  # noqa: SIM115 - closed by close()
                prefix="kbsync-scratch-", dir=self._folder)
        return self._side

    def _count_document(self, key: str, digests: Collection[str]) -> None:
        """Note a re-chunked document's digests (and, if it has any, the document) in its
        host group, for boilerplate and the digests that recur."""
        if not digests:
            return
        group = host_group(key)
        self._db.execute("INSERT OR IGNORE INTO members (grp, key) VALUES (?, ?)", (group, key))
        self._db.executemany(
            "INSERT OR IGNORE INTO occurrences (digest, grp, key) VALUES (?, ?, ?)",
            ((d, group, key) for d in digests))

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
