"""How many documents of a source hold each chunk digest, kept as documents are written, and
the boilerplate those counts decide, written once over a dialect.

A source's boilerplate (:func:`kbsync.core.plan.boilerplate_of_counts`) depends on every
document of it: counted again, it streamed every chunk digest of the source whenever
anything in it changed. The counts are kept instead, in ``digest_counts``, per source and
host group (:func:`kbsync.core.plan.host_group`): the row of a digest counts the
documents whose current chunks hold it, and the row of the empty digest counts the
documents that have any chunk (the group's size).

A write of a document's chunks notes what it takes away (read from the chunks it
replaces) and what it adds (read from the chunks it wrote) in a temporary table of its
connection, ``digest_changes``, by statements that send only the documents' keys;
the transaction adds them up at its commit and writes each changed count once, in key
order: an edit's unchanged chunks cost nothing, and concurrent writers (PostgreSQL
workers) take the locks of shared counts in one order, never in a cycle, and only for
the moment before they commit. A count that falls to zero is deleted. Deciding
boilerplate then reads, per group, the digests at or above its floor through a partial
index of the counts of at least :data:`~kbsync.core.plan.BOILERPLATE_MIN_DOCUMENTS`.

The counts are derived state: verify counts the current chunks again into a temporary
table of a read snapshot and compares the two in SQL (:func:`drift`), and its repair
counts them again where they differ (:meth:`DigestCounts.recount_drifted`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TypeVar

from kbsync.core.plan import BOILERPLATE_MIN_DOCUMENTS, boilerplate_floor, host_group
from kbsync.crashpoints import crashpoint
from kbsync.store.rows import CURRENT
from kbsync.store.sql.base import SqlBase
from kbsync.store.sql.dialect import Column, Dialect

__all__ = ["GROUP_SIZE", "DigestCounts", "count_stored", "drift", "drift_lines", "recount"]

GROUP_SIZE = ""
"""The digest of the row that counts the documents of a group that have any chunk (the
tables are :data:`~kbsync.store.sql.schema.COUNTS_TABLE` and its index)."""

# The pending changes of a transaction, and the changes a sync foresees (see
# boilerplate_counted): temporary tables of the connection, empty between transactions.
_CHANGES = "digest_changes"
_FORESEEN = "digest_foreseen"
# A recount that verify compares with the kept counts: dropped with the read transaction
# it is made in (never committed).
_RECOUNT = "digest_recount"

_COLUMNS: tuple[Column, ...] = (
    ("source", "text"), ("grp", "text"), ("digest", "text"), ("n", "integer"))

_PAGE = 500

T = TypeVar("T")


def _pages(items: Iterable[T], size: int = _PAGE) -> Iterator[list[T]]:
    it = iter(items)
    while page := list(islice(it, size)):
        yield page


def _add(table: str) -> str:
    """Adding a row's count to the one its key has (``documents`` in the kept counts, ``n``
    in the temporary tables)."""
    n = "documents" if table == "digest_counts" else "n"
    return (f" ON CONFLICT (source, grp, digest) DO UPDATE SET {n} = {table}.{n} + "
            f"excluded.{n}")


# A foreseen change ``f`` joined with the count ``c`` it changes, and that count after it.
_STORED = ("LEFT JOIN digest_counts c ON c.source = f.source AND c.grp = f.grp "
           "AND c.digest = f.digest")
_AFTER = "coalesce(c.documents, 0) + f.n"


class DigestCounts(SqlBase):
    """The kept digest counts: noted by the document writes, written at each commit, and the
    boilerplate decided from them (:meth:`boilerplate_counted`)."""

    _counting_ready = False  # whether this connection has the temporary tables
    _counting_made = False  # whether this transaction made them (theirs once it commits)
    _counts_pending = False  # whether this transaction noted changes
    _counts_dropped = False  # whether some of them take documents away

    # -- the transaction's hooks ---------------------------------------------------------

    def _before_begin(self) -> None:
        super()._before_begin()
        self._counting_made = self._counts_pending = self._counts_dropped = False

    def _counting(self) -> None:
        """Make the temporary tables of this connection, in the transaction that first needs
        them (a store that only reads never does: a server in recovery refuses them)."""
        if self._counting_ready or self._counting_made:
            return
        for table in (_CHANGES, _FORESEEN):
            self._dialect.send(
                f"CREATE TEMP TABLE IF NOT EXISTS {table} (source TEXT NOT NULL, "
                "grp TEXT NOT NULL, digest TEXT NOT NULL, n INTEGER NOT NULL, "
                "PRIMARY KEY (source, grp, digest))")
        self._counting_made = True

    def _after_commit(self) -> None:
        super()._after_commit()
        self._counting_ready |= self._counting_made  # a rolled back transaction made none

    def _before_commit(self) -> None:
        super()._before_commit()
        if not self._counts_pending:
            return
        self._counts_pending = False
        crashpoint("store.write_digest_counts")
        sql = self._dialect
        sql.send(f"INSERT INTO digest_counts (source, grp, digest, documents) SELECT source, "
                 f"grp, digest, n FROM {_CHANGES} WHERE n <> 0 ORDER BY source, grp, digest "
                 "ON CONFLICT (source, grp, digest) DO UPDATE "
                 "SET documents = digest_counts.documents + excluded.documents")
        if self._counts_dropped:  # only a count taken down can reach zero
            sql.send("DELETE FROM digest_counts WHERE documents = 0 AND (source, grp, digest) "
                     f"IN (SELECT source, grp, digest FROM {_CHANGES} WHERE n < 0)")
        sql.send(f"DELETE FROM {_CHANGES}")

    # -- what the document writes note ---------------------------------------------------

    def _count_stored(self, source: str, keys: Sequence[str], sign: int,
                      group: str | None = None, table: str = _CHANGES) -> None:
        """Note the digests of the current chunks of the documents at ``keys``, as they are
        stored now, as taken away (``sign`` -1) or added (+1), each document once, in
        ``table``; under ``group`` rather than their keys' own (a document that moves to
        another host)."""
        if not keys:
            return
        self._counting()
        count_stored(self._dialect, table, source, keys, sign, group)
        if table == _CHANGES:
            self._counts_pending = True
            self._counts_dropped |= sign < 0

    def _note(self, table: str, source: str, counts: Mapping[tuple[str, str], int]) -> None:
        """Add ``counts`` ((group, digest) -> documents) to ``table``, a temporary table."""
        self._counting()
        self._dialect.insert(table, _COLUMNS,
                             [(source, g, d, n) for (g, d), n in sorted(counts.items())],
                             conflict=_add(table))

    # -- deciding boilerplate ------------------------------------------------------------

    def boilerplate_counted(self, source: str, share: float, *,
                            replaced: Iterable[str] = (),
                            added: Iterable[tuple[str, str, int]] = (),
                            members: Mapping[str, int] | None = None) -> frozenset[str]:
        """The boilerplate of ``source`` (:func:`~kbsync.core.plan.boilerplate_of_counts`)
        by the kept counts; with what a sync is about to write, as it will be then:
        ``replaced`` are the keys whose stored chunks will no longer count (re-chunked or
        gone), ``added`` the (group, digest, documents) that will count instead, and
        ``members`` the documents with chunks among those, by group.

        Reads the counts at or above each group's floor, and the foreseen changes (held
        in a temporary table, not in memory); never every digest of the source.
        """
        with self._transaction():
            foreseen = False
            for page in _pages(replaced):
                self._count_stored(source, page, -1, table=_FORESEEN)
                foreseen = True
            for rows in _pages(added, 5000):
                self._note(_FORESEEN, source, {(g, d): n for g, d, n in rows})
                foreseen = True
            if members:
                self._note(_FORESEEN, source, {(g, GROUP_SIZE): n for g, n in members.items()})
                foreseen = True
            try:
                return self._boilerplate(source, share, foreseen=foreseen)
            finally:
                if foreseen:
                    self._dialect.send(f"DELETE FROM {_FORESEEN}")

    def _boilerplate(self, source: str, share: float, *, foreseen: bool) -> frozenset[str]:
        """The digests at or above their group's floor, the foreseen changes (if any) added."""
        sql = self._dialect
        sizes = {str(g): int(n) for g, n in sql.rows(
            "SELECT grp, documents FROM digest_counts WHERE source = ? AND digest = ?",
            (source, GROUP_SIZE))}
        unchanged = ""
        if foreseen:
            sizes.update((str(g), int(n)) for g, n in sql.rows(
                f"SELECT f.grp, {_AFTER} FROM {_FORESEEN} f {_STORED} "
                "WHERE f.source = ? AND f.digest = ?", (source, GROUP_SIZE)))
            unchanged = (f" AND NOT EXISTS (SELECT 1 FROM {_FORESEEN} f WHERE f.source = "
                         "c.source AND f.grp = c.grp AND f.digest = c.digest)")
        found: set[str] = set()
        for grp, size in sorted(sizes.items()):
            floor = boilerplate_floor(size, share)
            found.update(str(r[0]) for r in sql.rows(
                "SELECT c.digest FROM digest_counts c WHERE c.source = ? AND c.grp = ? "
                f"AND c.documents >= {BOILERPLATE_MIN_DOCUMENTS} AND c.documents >= ? "
                f"AND c.digest <> ?{unchanged}", (source, grp, floor, GROUP_SIZE)))
            if foreseen:
                found.update(str(r[0]) for r in sql.rows(
                    f"SELECT f.digest FROM {_FORESEEN} f {_STORED} WHERE f.source = ? "
                    f"AND f.grp = ? AND f.digest <> ? AND {_AFTER} >= ?",
                    (source, grp, GROUP_SIZE, floor)))
        return frozenset(found)

    # -- counting again ------------------------------------------------------------------

    def digest_counts(self, source: str) -> dict[tuple[str, str], int]:
        """The kept counts of ``source``: (group, digest) -> documents (the empty digest:
        the group's documents that have chunks), as :meth:`recount_digests` makes them."""
        return {(str(g), str(d)): int(n) for g, d, n in self._dialect.rows(
            "SELECT grp, digest, documents FROM digest_counts WHERE source = ?", (source,))}

    def recount_digests(self) -> None:
        """Count every source's digests again from the current chunks, in one transaction."""
        with self._transaction():
            recount(self._dialect)

    def recount_drifted(self) -> int:
        """Count every source's digests again if some kept count differs from a recount
        (what ``repair`` does); how many differed (0: nothing was written)."""
        differ = sum(self.digest_drift().values())
        if differ:
            self.recount_digests()
        return differ

    def digest_drift(self) -> dict[str, int]:
        """Source -> how many of its kept counts differ from a recount of the current
        chunks (:func:`drift`); the sources whose counts agree are left out.

        In a read transaction of one snapshot that is rolled back: a sync committing
        meanwhile is no drift, and nothing of the recount is kept.
        """
        sql = self._dialect
        sql.begin_snapshot()
        try:
            return drift(sql)
        finally:
            sql.rollback()


def count_stored(sql: Dialect, table: str, source: str, keys: Sequence[str], sign: int,
                 group: str | None = None) -> None:
    """Add ``sign`` times the documents at ``keys`` to the count of each digest of their
    current chunks, and to their group's size, in ``table`` (the kept counts or a
    temporary table of changes); in ``group``, or each in its key's own."""
    n = "documents" if table == "digest_counts" else "n"
    by_group: dict[str, list[str]] = {}
    for key in keys:
        by_group.setdefault(host_group(key) if group is None else group, []).append(key)
    for grp, them in sorted(by_group.items()):
        for listed, args in sql.any_of("d.key", them):
            sql.send(f"INSERT INTO {table} (source, grp, digest, {n}) "
                     "SELECT d.source, ?, c.digest, ? * count(DISTINCT d.id) "
                     f"FROM documents d JOIN chunks c ON {CURRENT} WHERE d.source = ? "
                     f"AND {listed} GROUP BY d.source, c.digest{_add(table)}",
                     (grp, sign, source, *args))
            sql.send(f"INSERT INTO {table} (source, grp, digest, {n}) "
                     "SELECT d.source, ?, ?, ? * count(DISTINCT d.id) "
                     f"FROM documents d JOIN chunks c ON {CURRENT} WHERE d.source = ? "
                     f"AND {listed} GROUP BY d.source{_add(table)}",
                     (grp, GROUP_SIZE, sign, source, *args))


def _fill(sql: Dialect, table: str) -> None:
    """Count the current chunks of every source into ``table`` (empty), a page of documents
    at a time."""
    for source in sorted(str(r[0]) for r in sql.rows("SELECT DISTINCT source FROM documents")):
        after = ""
        while keys := [str(r[0]) for r in sql.rows(
                "SELECT key FROM documents WHERE source = ? AND key > ? ORDER BY key LIMIT ?",
                (source, after, 5000))]:
            count_stored(sql, table, source, keys, 1)
            after = keys[-1]


def recount(sql: Dialect) -> None:
    """Fill the kept counts anew from the current chunks of every source, in the caller's
    transaction, a page of documents at a time (what a migration that adds them runs)."""
    sql.send("DELETE FROM digest_counts")
    _fill(sql, "digest_counts")


def drift(sql: Dialect) -> dict[str, int]:
    """Source -> how many of its kept counts differ from a recount of the current chunks: a
    count that is wrong, missing or of nothing (a digest no current chunk holds, a source
    without documents). The sources whose counts agree are left out.

    Recounts as :func:`recount` does, into a temporary table, and compares the two in
    SQL, so only a count per source comes back; the caller's transaction must be rolled
    back (it drops the table; the kept counts are not touched).
    """
    sql.send(f"CREATE TEMP TABLE IF NOT EXISTS {_RECOUNT} (source TEXT NOT NULL, "
             "grp TEXT NOT NULL, digest TEXT NOT NULL, n INTEGER NOT NULL, "
             "PRIMARY KEY (source, grp, digest))")
    sql.send(f"DELETE FROM {_RECOUNT}")  # a caller's outer transaction may have made it
    _fill(sql, _RECOUNT)
    same = "r.source = k.source AND r.grp = k.grp AND r.digest = k.digest"
    return {str(source): int(n) for source, n in sql.rows(
        "SELECT source, count(*) FROM ("
        f"SELECT k.source FROM digest_counts k LEFT JOIN {_RECOUNT} r ON {same} "
        "WHERE r.n IS NULL OR r.n <> k.documents UNION ALL "
        f"SELECT r.source FROM {_RECOUNT} r WHERE NOT EXISTS "
        f"(SELECT 1 FROM digest_counts k WHERE {same})) x GROUP BY source ORDER BY source")}


def drift_lines(differ: Mapping[str, int]) -> list[str]:
    """What :func:`drift` found, one line per source, as verify says it."""
    return [f"source {source}: {n} digest count differs from a recount of its chunks "
            "(boilerplate is decided from it); `kbsync verify --repair` counts it again"
            if n == 1 else
            f"source {source}: {n} digest counts differ from a recount of its chunks "
            "(boilerplate is decided from them); `kbsync verify --repair` counts them again"
            for source, n in sorted(differ.items())]
