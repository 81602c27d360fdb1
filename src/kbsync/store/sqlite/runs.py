"""The run log: one row per sync, its report as JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kbsync.store import RunRecord
from kbsync.store.rows import run_record
from kbsync.store.sqlite.connection import SqliteBase

__all__ = ["RunTables"]


class RunTables(SqliteBase):
    """The :class:`~kbsync.store.RunLog` role of the SQLite store."""

    def record_run(self, started: str, finished: str, report: Mapping[str, Any]) -> int:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO runs (started, finished, report) VALUES (?, ?, ?)",
                (started, finished, json.dumps(report, sort_keys=True)),
            )
        return int(cursor.lastrowid or 0)

    def runs(self, limit: int = 50) -> list[RunRecord]:
        rows = self._db.execute(
            "SELECT id, started, finished, report FROM runs ORDER BY id DESC LIMIT ?",
            (max(limit, 0),),
        ).fetchall()
        return [run_record(r) for r in rows]

    def run(self, run_id: int) -> RunRecord | None:
        row = self._db.execute(
            "SELECT id, started, finished, report FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        return run_record(row) if row else None
