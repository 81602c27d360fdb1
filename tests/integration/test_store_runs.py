"""Reading recorded runs back from each kind of store."""

from __future__ import annotations

from kbsync.store import RunRecord
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore


def test_runs_come_back_newest_first_limited_and_one_by_one(
        store: SqliteStore | PostgresStore) -> None:
    ids = [store.record_run(f"2026-01-0{i}T00:00:00+00:00", f"2026-01-0{i}T00:01:00+00:00",
                            {"documents": {"new": i}}) for i in range(1, 4)]
    runs = store.runs()
    assert [r.id for r in runs] == ids[::-1]
    assert runs[0] == RunRecord(ids[2], "2026-01-03T00:00:00+00:00",
                                "2026-01-03T00:01:00+00:00", {"documents": {"new": 3}})
    assert [r.id for r in store.runs(limit=2)] == ids[:0:-1]
    assert store.runs(limit=0) == []
    assert store.run(ids[0]) == runs[-1]
    assert store.run(999) is None
