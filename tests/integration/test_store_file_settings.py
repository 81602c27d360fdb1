"""The SQLite store's file settings: its page size and when its write-ahead log is copied in."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kbsync.store.sqlite import SqliteStore


def _settings(store: SqliteStore) -> tuple[int, int]:
    page = store._db.execute("PRAGMA page_size").fetchone()[0]
    checkpoint = store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    return page, checkpoint


def test_a_new_store_has_16_kb_pages_and_checkpoints_its_log_every_32_mb(
        tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state" / "kbsync.db")
    try:
        assert _settings(store) == (16384, 2048)
    finally:
        store.close()


def test_an_existing_store_keeps_its_page_size_and_its_log_stays_32_mb(tmp_path: Path) -> None:
    path = tmp_path / "state" / "kbsync.db"
    path.parent.mkdir(mode=0o700)
    made = sqlite3.connect(path)
    made.executescript("PRAGMA page_size = 4096; VACUUM;")
    made.close()
    path.chmod(0o600)
    store = SqliteStore(path)
    try:
        assert _settings(store) == (4096, 8192)
    finally:
        store.close()
    reopened = SqliteStore(path)
    try:
        assert _settings(reopened) == (4096, 8192)
    finally:
        reopened.close()
