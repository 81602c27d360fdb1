"""The manifest's reads and the per-source hints (boilerplate, frontier, schedules) and the
outbox, written once over a dialect."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace

from kbsync.core.plan import StoredDocument
from kbsync.crashpoints import crashpoint
from kbsync.model import PageSchedule
from kbsync.store.rows import CURRENT, MANIFEST_COLUMNS, stored_document
from kbsync.store.sql.base import SqlBase

__all__ = ["ManifestTables"]


class ManifestTables(SqlBase):
    """What :class:`~kbsync.store.Manifest` reads, :class:`~kbsync.store.Frontier`,
    :class:`~kbsync.store.Schedules` and the outbox of :class:`~kbsync.store.Mirror`."""

    def manifest(self, source: str, after: str | None = None,
                 limit: int | None = None) -> dict[str, StoredDocument]:
        sql = f"SELECT {MANIFEST_COLUMNS} FROM documents WHERE source = ? AND key > ? ORDER BY key"
        args: tuple[str | int, ...] = (source, "" if after is None else after)
        if limit is not None and limit > 0:
            sql, args = sql + " LIMIT ?", (*args, limit)
        return {r[0]: stored_document(r) for r in self._dialect.rows(sql, args)}

    def with_digests(self, source: str, docs: Collection[StoredDocument]) -> list[StoredDocument]:
        digests: dict[str, list[str]] = {}
        for keys, args in self._dialect.any_of("d.key", [d.key for d in docs]):
            for key, digest in self._dialect.rows(
                    f"SELECT d.key, c.digest FROM documents d JOIN chunks c ON {CURRENT} "
                    f"WHERE d.source = ? AND {keys} ORDER BY d.key, c.idx", (source, *args)):
                digests.setdefault(key, []).append(digest)
        return [replace(d, chunk_digests=tuple(digests.get(d.key, ()))) for d in docs]

    def document_facts(self, documents: Collection[tuple[str, str]],
                       ) -> dict[tuple[str, str], tuple[str | None, str | None]]:
        keys: dict[str, list[str]] = {}
        for source, key in sorted(set(documents)):
            keys.setdefault(source, []).append(key)
        facts: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        for source, wanted in keys.items():
            for where, args in self._dialect.any_of("key", wanted):
                for key, metadata, changed in self._dialect.rows(
                        f"SELECT key, metadata, last_changed FROM documents "
                        f"WHERE source = ? AND {where}", (source, *args)):
                    facts[(source, key)] = (metadata, changed)
        return facts

    def chunk_digests(self, source: str) -> Iterator[tuple[str, str]]:
        rows = self._dialect.stream(f"SELECT d.key, c.digest FROM documents d JOIN chunks c "
                                    f"ON {CURRENT} WHERE d.source = ?", (source,))
        yield from ((key, digest) for key, digest in rows)

    def source_names(self) -> set[str]:
        return {r[0] for r in self._dialect.rows("SELECT DISTINCT source FROM documents")}

    def mark_missing(self, source: str, key: str) -> None:
        with self._transaction():
            crashpoint("store.mark_missing")
            self._dialect.write("UPDATE documents SET missing = missing + 1 "
                                "WHERE source = ? AND key = ?", (source, key))

    def boilerplate(self, source: str) -> frozenset[str]:
        return frozenset(r[0] for r in self._dialect.rows(
            "SELECT digest FROM boilerplate WHERE source = ?", (source,)))

    def set_boilerplate(self, source: str, digests: Collection[str]) -> None:
        if self.boilerplate(source) == frozenset(digests):
            return
        self._invalidate()
        with self._transaction():
            self._dialect.write("DELETE FROM boilerplate WHERE source = ?", (source,))
            crashpoint("store.write_boilerplate")
            self._dialect.send_many("INSERT INTO boilerplate (source, digest) VALUES (?, ?)",
                                    [(source, d) for d in sorted(digests)])

    def frontier(self, source: str) -> frozenset[str]:
        return frozenset(r[0] for r in self._dialect.rows(
            "SELECT key FROM frontier WHERE source = ?", (source,)))

    def set_frontier(self, source: str, keys: Collection[str]) -> None:
        if self.frontier(source) == frozenset(keys):
            return
        with self._transaction():
            self._dialect.write("DELETE FROM frontier WHERE source = ?", (source,))
            crashpoint("store.write_frontier")
            self._dialect.send_many("INSERT INTO frontier (source, key) VALUES (?, ?)",
                                    [(source, k) for k in sorted(keys)])

    def schedules(self, source: str) -> dict[str, PageSchedule]:
        return {r[0]: PageSchedule(*r[1:]) for r in self._dialect.rows(
            "SELECT key, checked, changed, interval_seconds, digest, media_type FROM schedules "
            "WHERE source = ?", (source,))}

    def set_schedules(self, source: str, schedules: Mapping[str, PageSchedule],
                      replace: bool) -> None:
        with self._transaction():
            if replace:
                self._dialect.write("DELETE FROM schedules WHERE source = ?", (source,))
            crashpoint("store.write_schedules")
            self._dialect.send_many(
                "INSERT INTO schedules "
                "(source, key, checked, changed, interval_seconds, digest, media_type) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source, key) DO UPDATE SET "
                "checked = excluded.checked, changed = excluded.changed, "
                "interval_seconds = excluded.interval_seconds, digest = excluded.digest, "
                "media_type = excluded.media_type",
                [(source, k, s.checked, s.changed, s.interval, s.digest, s.media_type)
                 for k, s in sorted(schedules.items())])

    def pending_outbox(self) -> list[str]:
        return [r[0] for r in self._dialect.rows("SELECT vector_id FROM outbox ORDER BY id")]

    def clear_outbox(self, ids: Collection[str]) -> None:
        if not ids:
            return
        with self._transaction():
            crashpoint("store.clear_outbox")
            for listed, args in self._dialect.any_of("vector_id", sorted(ids)):
                self._dialect.write(f"DELETE FROM outbox WHERE {listed}", args)
