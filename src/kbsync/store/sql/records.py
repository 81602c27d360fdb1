"""Meta entries, the run log and erasure tombstones, written once over a dialect."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kbsync.crashpoints import crashpoint
from kbsync.store import RunRecord
from kbsync.store.rows import run_record
from kbsync.store.sql.base import SqlBase

__all__ = ["RecordTables"]

_RUN = "SELECT id, started, finished, report FROM runs "


class RecordTables(SqlBase):
    """The :class:`~kbsync.store.Meta` and :class:`~kbsync.store.RunLog` roles, and the
    tombstones of :class:`~kbsync.store.Erasures`."""

    def get_meta(self, name: str) -> str | None:
        row = self._dialect.one("SELECT value FROM meta WHERE name = ?", (name,))
        return None if row is None else str(row[0])

    def set_meta(self, name: str, value: str) -> None:
        old = self.get_meta(name)
        if value == "" and old is not None:
            with self._transaction():
                crashpoint("store.set_meta")
                self._dialect.write("DELETE FROM meta WHERE name = ?", (name,))
        elif value != "" and old != value:
            with self._transaction():
                crashpoint("store.set_meta")
                self._dialect.write("INSERT INTO meta (name, value) VALUES (?, ?) "
                                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                                    (name, value))

    def record_run(self, started: str, finished: str, report: Mapping[str, Any]) -> int:
        with self._transaction():
            crashpoint("store.record_run")
            row = self._dialect.returning(
                "INSERT INTO runs (started, finished, report) VALUES (?, ?, ?) RETURNING id",
                (started, finished, json.dumps(report, sort_keys=True)))
        assert row is not None
        return int(row[0])

    def runs(self, limit: int = 50) -> list[RunRecord]:
        return [run_record(r) for r in self._dialect.rows(_RUN + "ORDER BY id DESC LIMIT ?",
                                                          (max(limit, 0),))]

    def run(self, run_id: int) -> RunRecord | None:
        row = self._dialect.one(_RUN + "WHERE id = ?", (run_id,))
        return run_record(row) if row else None

    def add_erasure(self, pattern: str, created: str) -> None:
        with self._transaction():
            crashpoint("store.add_erasure")
            self._dialect.write("INSERT INTO erasures (pattern, created) VALUES (?, ?) "
                                "ON CONFLICT (pattern) DO NOTHING", (pattern, created))

    def erasures(self) -> list[tuple[str, str]]:
        return [(str(r[0]), str(r[1])) for r in self._dialect.rows(
            f"SELECT pattern, created FROM erasures ORDER BY {self._dialect.binary('pattern')}")]

    def remove_erasure(self, pattern: str) -> bool:
        with self._transaction():
            crashpoint("store.remove_erasure")
            return self._dialect.write("DELETE FROM erasures WHERE pattern = ?", (pattern,)) > 0
