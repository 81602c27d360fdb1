"""Erasure: after `erase` (which runs gc) no row, vector or byte of the document is left."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kbsync.app.knowledge_base import DocumentRef, KnowledgeBase
from kbsync.errors import StoreError
from tests.reliability.harness import make_kb

CANARY = "Quuxwobble Zarfnik Plover"
KEY = "zarfnik-memo.txt"


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_erase_leaves_no_row_vector_or_byte_of_the_document_in_any_state_file(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", 8)
    memo = root / "docs" / KEY
    memo.write_text(f"The memo says {CANARY} twice a day.\n\n" * 30)
    state = root / ".kbsync"
    with KnowledgeBase.open(root) as kb:
        kb.sync()
        memo.write_text(memo.read_text() + f"A second version of {CANARY}.\n")
        kb.sync()  # now in the current and the previous generation, and in `previous`
        assert kb.search(CANARY, mode="text")[0].key == KEY
        db = kb.store._db  # the knowledge base's own connection: the same WAL and cache
        assert db.execute("PRAGMA secure_delete").fetchone()[0] == 1
        digests = [r[0] for r in db.execute(
            "SELECT c.digest FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.key = ?",
            (KEY,))]
        assert digests
        assert any(CANARY.encode() in p.read_bytes() for p in _files(state))  # it can see it

        memo.unlink()
        assert kb.erase(KEY).documents == (DocumentRef("docs", KEY),)
        assert kb.verify().problems == ()
        marks = ",".join("?" * len(digests))
        for table in ("chunk_texts", "embeddings"):
            assert db.execute(f"SELECT count(*) FROM {table} WHERE digest IN ({marks})",
                              digests).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM documents WHERE key = ?",
                          (KEY,)).fetchone()[0] == 0
        assert not kb.search(CANARY, mode="text")
        files = _files(state)
        assert {p.name for p in files} >= {"kbsync.db", "kbsync.db-wal", "kbsync.db-shm"}
        for path in files:  # while the store is open: the WAL and shared memory too
            data = path.read_bytes()
            assert CANARY.encode() not in data, path.name
            assert KEY.encode() not in data, path.name
    for path in _files(state):
        assert CANARY.encode() not in path.read_bytes(), path.name


def test_the_state_directory_is_private_and_its_files_are_owner_only(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 3)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
        state = root / ".kbsync"
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in state.iterdir()}
    assert set(modes) >= {"kbsync.db", "kbsync.db-wal", "kbsync.db-shm", "kbsync.db.lock"}
    assert set(modes.values()) == {0o600}, modes


def test_a_world_writable_state_directory_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 3)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    (root / ".kbsync").chmod(0o777)
    with pytest.raises(StoreError, match="writable by every user"):
        KnowledgeBase.open(root)
    run = subprocess.run([sys.executable, "-m", "kbsync", "status", "-c", str(root)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert "writable by every user" in run.stderr
    assert "Traceback" not in run.stderr
    db = sqlite3.connect(root / ".kbsync" / "kbsync.db")  # and nothing was changed
    assert db.execute("SELECT count(*) FROM documents").fetchone() == (3,)
    db.close()
