"""The counts a status shows, read over a dialect: written once for every SQL store, and
for a status read without opening the store (:mod:`kbsync.store.sqlite.status`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from kbsync.store import StoreStatus
from kbsync.store.sql.fragments import CURRENT

if TYPE_CHECKING:
    from kbsync.store.sql.dialect import Dialect

__all__ = ["store_status"]


def store_status(sql: Dialect) -> StoreStatus:
    """What the store behind ``sql`` holds: documents by source, current chunks, cached
    vectors, runs and the last run's report."""
    by_source = {str(r[0]): int(r[1]) for r in sql.rows(
        "SELECT source, count(*) FROM documents GROUP BY source")}
    last = sql.one("SELECT report FROM runs ORDER BY id DESC LIMIT 1")

    def count(query: str) -> int:
        row = sql.one(query)
        return 0 if row is None else int(row[0])

    return StoreStatus(
        documents=sum(by_source.values()),
        chunks=count(f"SELECT count(*) FROM chunks c JOIN documents d ON {CURRENT}"),
        embeddings=count("SELECT count(*) FROM embeddings"),
        runs=count("SELECT count(*) FROM runs"),
        by_source=by_source,
        last_run=json.loads(last[0]) if last else None,
    )
