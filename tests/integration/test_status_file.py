"""A status read from a SQLite store's file, without opening the store: the same counts, last
run and known damage as the store gives, and every file it cannot read as a current store
left to the store, which migrates it or says what is wrong."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from kbsync.app.status import read_status
from kbsync.engine import init_config, load_outline, open_status
from kbsync.errors import StoreError
from kbsync.store.sqlite import SCHEMA_VERSION, SqliteStore
from kbsync.store.sqlite.status import READS_VERSION, StatusFile, read_status_file
from tests.conftest import CORPUS, Backend


@pytest.fixture
def synced(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:3]:
        (tmp_path / "docs" / path.name).write_bytes(path.read_bytes())
    with KnowledgeBase.create(tmp_path, ["docs"], embedder={"kind": "hashing"}) as kb:
        kb.sync()
    return tmp_path


def _db(root: Path) -> Path:
    return load_outline(root).root / load_outline(root).store.settings.path


def test_the_status_reads_know_the_schema_of_this_kbsync() -> None:
    assert READS_VERSION == SCHEMA_VERSION


def test_a_status_read_from_the_file_says_what_the_store_says(synced: Path) -> None:
    store = SqliteStore(_db(synced))
    store.remember_damage("verify found a vector that is not finite")
    try:
        found = read_status_file(_db(synced))
        assert found is not None
        assert found.status() == store.status()
        assert found.known_damage() == store.known_damage()
    finally:
        store.close()
    assert found.status().documents == 3
    assert found.status().last_run is not None


def test_a_status_opens_no_store_for_a_current_file(synced: Path) -> None:
    assert isinstance(open_status(load_outline(synced)), StatusFile)


def test_a_status_of_a_store_with_an_older_schema_opens_the_store_which_migrates_it(
        synced: Path) -> None:
    db = sqlite3.connect(_db(synced))
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    db.close()
    assert read_status_file(_db(synced)) is None
    assert read_status(synced).documents == 3
    db = sqlite3.connect(_db(synced))
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


def test_a_status_of_a_store_newer_than_this_kbsync_is_refused_as_the_store_refuses_it(
        synced: Path) -> None:
    db = sqlite3.connect(_db(synced))
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer than this kbsync knows"):
        read_status(synced)


def test_a_status_of_a_file_that_is_no_store_says_so_in_the_stores_words(synced: Path) -> None:
    for name in ("kbsync.db-wal", "kbsync.db-shm"):
        (_db(synced).parent / name).unlink(missing_ok=True)
    _db(synced).write_bytes(b"not a database " * 1000)
    assert read_status_file(_db(synced)) is None
    with pytest.raises(StoreError, match="not a kbsync store"):
        read_status(synced)


def test_a_status_of_a_store_not_made_yet_is_empty_and_makes_no_file(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    KnowledgeBase.create(tmp_path, ["docs"], embedder={"kind": "hashing"}).close()
    _db(tmp_path).unlink(missing_ok=True)
    assert read_status(tmp_path).documents == 0
    assert not _db(tmp_path).exists()


def test_a_status_says_what_the_knowledge_base_says_on_each_kind_of_store(
        tmp_path: Path, backend: Backend) -> None:
    (tmp_path / "docs").mkdir()
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:3]:
        (tmp_path / "docs" / path.name).write_bytes(path.read_bytes())
    init_config(tmp_path, ["docs"], embedder={"kind": "hashing"})
    backend.configure(tmp_path)
    with KnowledgeBase.open(tmp_path) as kb:
        kb.sync()
        kb.store.remember_damage("the database reported damage: a test says so")
        assert read_status(tmp_path) == kb.status()
    assert read_status(tmp_path).damage is not None
