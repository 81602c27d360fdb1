"""The run log: one row per sync, its report as JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kbsync.crashpoints import crashpoint
from kbsync.store import RunRecord
from kbsync.store.postgres.connection import PostgresBase, scalar
from kbsync.store.rows import run_record

__all__ = ["RunTables"]


class RunTables(PostgresBase):
    """The :class:`~kbsync.store.RunLog` role of the PostgreSQL store."""

    def record_run(self, started: str, finished: str, report: Mapping[str, Any]) -> int:
        crashpoint("store.record_run")
        run_id = scalar(
            self._conn,
            "INSERT INTO runs (started, finished, report) VALUES (%s, %s, %s) RETURNING id",
            (started, finished, json.dumps(report, sort_keys=True)))
        self._changes += 1
        return int(run_id)

    def runs(self, limit: int = 50) -> list[RunRecord]:
        rows = self._conn.execute(
            "SELECT id, started, finished, report FROM runs ORDER BY id DESC LIMIT %s",
            (max(limit, 0),)).fetchall()
        return [run_record(r) for r in rows]

    def run(self, run_id: int) -> RunRecord | None:
        row = self._conn.execute(
            "SELECT id, started, finished, report FROM runs WHERE id = %s", (run_id,)).fetchone()
        return run_record(row) if row else None
