"""The digest counts that boilerplate is decided from, checked by verify against a recount of
the current chunks and counted again by its repair, on each kind of store: a count changed
behind kbsync's back breaks no link, so only the recount finds it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import init_config
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from tests.conftest import CORPUS, Backend

# Three counts of the source "docs" made wrong: one too high, one gone, one of nothing.
_TAMPERING = (
    "UPDATE digest_counts SET documents = documents + 1 WHERE digest = "
    "(SELECT min(digest) FROM digest_counts WHERE digest <> '')",
    "DELETE FROM digest_counts WHERE digest = (SELECT max(digest) FROM digest_counts)",
    "INSERT INTO digest_counts (source, grp, digest, documents) "
    "VALUES ('docs', '', 'no-chunk-holds-this', 4)",
)


@pytest.fixture
def kb(tmp_path: Path, backend: Backend) -> Path:
    """A knowledge base of 12 files, synced, on each kind of store."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in sorted(CORPUS.iterdir())[:12]:
        shutil.copy(path, docs / path.name)
    init_config(tmp_path, ["docs"])
    backend.configure(tmp_path)
    with KnowledgeBase.open(tmp_path) as opened:
        opened.sync()
    return tmp_path


def _counts(kb: Path) -> dict[tuple[str, str], int]:
    with KnowledgeBase.open(kb) as engine:
        store = engine.store
        assert isinstance(store, SqliteStore | PostgresStore)
        return store.digest_counts("docs")


def test_digest_counts_changed_by_hand_fail_verify_and_repair_counts_them_again(
        kb: Path, backend: Backend) -> None:
    kept = _counts(kb)
    with KnowledgeBase.open(kb) as engine:
        assert engine.verify().ok
        store = engine.store
        assert isinstance(store, SqliteStore | PostgresStore)
        for sql in _TAMPERING:
            backend.execute(store, sql)
    with KnowledgeBase.open(kb) as engine:
        found = engine.verify()
        assert not found.ok
        assert found.problems == (
            "source docs: 3 digest counts differ from a recount of its chunks (boilerplate "
            "is decided from them); `kbsync verify --repair` counts them again",)
        # Verify compares without writing: the wrong counts are still there.
        assert _counts(kb) != kept
        mended = engine.verify(repair=True)
        assert mended.ok, mended.remaining
        assert "rebuilt the digest counts (3 differed from a recount)" in mended.repaired
    assert _counts(kb) == kept
    with KnowledgeBase.open(kb) as engine:
        again = engine.verify()
        assert again.ok, again.problems
        assert again.repaired == ()


def test_a_read_only_sqlite_store_finds_drifted_counts_and_keeps_nothing_of_its_recount(
        kb: Path, backend: Backend) -> None:
    if backend.name != "sqlite":
        pytest.skip("a read-only store is a SQLite file opened read-only")
    with KnowledgeBase.open(kb) as engine:
        store = engine.store
        assert isinstance(store, SqliteStore)
        backend.execute(store, _TAMPERING[0])
        path = store.path
    read_only = SqliteStore(path, read_only=True)
    try:
        assert read_only.digest_drift() == {"docs": 1}
        problems = read_only.verify("any", None)
        assert [p for p in problems if "digest count" in p] == [
            "source docs: 1 digest count differs from a recount of its chunks (boilerplate "
            "is decided from it); `kbsync verify --repair` counts it again"]
        assert read_only.verify("any", None) == problems  # no recount table was left behind
    finally:
        read_only.close()
