"""Damaged store files: found by verify, told in one line, repaired or rebuilt.

The damage is real: bytes of a copy of a real store are overwritten at a page
found from ``PRAGMA page_size`` and the b-tree's pages in ``dbstat``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.cli import app
from kbsync.crashpoints import ENV_CRASH_AT, ENV_RECORD
from kbsync.engine import writer_lock
from kbsync.errors import LockedError
from tests.reliability.harness import make_kb


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synced knowledge base of 120 documents (about 500 chunks), copied by each test.

    Its file has 4 KB pages (a store keeps the page size its file was made with), so
    that each index is deep enough to have an interior page to damage.
    """
    root = make_kb(tmp_path_factory.mktemp("damage") / "kb", 120)
    _db(root).parent.mkdir(mode=0o700)
    made = sqlite3.connect(_db(root))
    made.executescript("PRAGMA page_size = 4096; VACUUM;")
    made.close()
    _db(root).chmod(0o600)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    return root


def _copy(pristine: Path, tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    shutil.copytree(pristine, root)
    return root


def _db(root: Path) -> Path:
    return root / ".kbsync" / "kbsync.db"


def _pages(root: Path, table: str) -> tuple[int, list[tuple[int, str]]]:
    """The page size and the (page number, page type) of ``table``'s b-tree."""
    db = sqlite3.connect(_db(root))
    try:
        size = db.execute("PRAGMA page_size").fetchone()[0]
        pages = db.execute("SELECT pageno, pagetype FROM dbstat WHERE name = ? ORDER BY pageno",
                           (table,)).fetchall()
    finally:
        db.close()
    return size, pages


def _overwrite(root: Path, page: int, size: int, offset: int, data: bytes) -> None:
    with open(_db(root), "r+b") as f:
        f.seek((page - 1) * size + offset)
        f.write(data)


def _zero_a_leaf(root: Path, table: str) -> None:
    size, pages = _pages(root, table)
    leaves = [p for p, kind in pages if kind == "leaf"]
    _overwrite(root, leaves[len(leaves) // 2], size, 0, bytes(size))


def _bad_child_pointer(root: Path, index: str) -> None:
    """An interior page of ``index`` whose right-most child is far past the file's end."""
    size, pages = _pages(root, index)
    interior = [p for p, kind in pages if kind == "internal"]
    assert interior, "the index needs an interior page"
    # Bytes 8..11 of an interior b-tree page header: the right-most child's page number.
    _overwrite(root, interior[0], size, 8, (1_000_000).to_bytes(4, "big"))


def _kbsync(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the command line in this process, as ``kbsync ARGS -c ROOT`` would."""
    result = CliRunner().invoke(app, [*args, "-c", str(root)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def _one_line_error(run: subprocess.CompletedProcess[str], root: Path) -> str:
    assert "Traceback" not in run.stderr + run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ")
    assert str(_db(root)) in lines[0]
    return lines[0]


def test_a_page_with_an_invalid_page_number_fails_verify_in_one_line(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    _bad_child_pointer(root, "chunks_digest")
    run = _kbsync(root, "verify")
    assert run.returncode == 4, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1
    assert "invalid page number 1000000" in lines[0]
    assert "kbsync rebuild" in lines[0]
    assert "kbsync verify --repair" in lines[0]


def test_a_zeroed_leaf_page_makes_verify_sync_and_search_say_one_line(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    _zero_a_leaf(root, "chunks")
    verify = _kbsync(root, "verify")
    assert verify.returncode == 4
    assert "Traceback" not in verify.stderr
    assert len(verify.stdout.strip().splitlines()) == 1
    assert "damaged" in verify.stdout
    assert "kbsync rebuild" in verify.stdout
    (root / "docs" / "doc-000.txt").write_text("A new first line.\n", encoding="utf-8")
    for args in (("sync",), ("search", "harbour light")):
        run = _kbsync(root, *args)
        assert run.returncode == 1
        assert "kbsync rebuild" in _one_line_error(run, root)


def test_repair_rebuilds_a_drifted_full_text_index_and_lost_chunk_texts(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    db = sqlite3.connect(_db(root), isolation_level=None)
    try:
        db.execute("DELETE FROM chunk_fts WHERE rowid IN (SELECT id FROM chunks LIMIT 7)")
        db.execute("DELETE FROM chunk_texts WHERE digest IN "
                   "(SELECT digest FROM chunks ORDER BY id DESC LIMIT 3)")
    finally:
        db.close()
    with KnowledgeBase.open(root) as kb:
        before = kb.verify()
        assert not before.ok
        repaired = kb.verify(repair=True)
        assert repaired.ok, repaired.remaining
        assert any("full-text index" in line for line in repaired.repaired)
        assert any("3 restored" in line for line in repaired.repaired)
        assert kb.verify().ok
        assert kb.search("harbour light", mode="text")


def test_repair_embeds_the_chunks_whose_vectors_were_lost(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    db = sqlite3.connect(_db(root), isolation_level=None)
    try:
        db.execute("DELETE FROM embeddings WHERE digest IN "
                   "(SELECT DISTINCT digest FROM chunks ORDER BY digest LIMIT 5)")
    finally:
        db.close()
    with KnowledgeBase.open(root) as kb:
        assert sum("has no vector" in p for p in kb.verify().problems) >= 5
        repaired = kb.verify(repair=True)
        assert repaired.ok, repaired.remaining
        assert "embedded 5 chunks that had no vector" in repaired.repaired
        assert kb.verify().ok


def test_repair_leaves_the_vectors_of_a_changed_embedder_to_a_sync(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    config = root / "kbsync.toml"
    body = config.read_text(encoding="utf-8")
    dimension = re.search(r"dimension = (\d+)", body)
    assert dimension is not None
    config.write_text(body.replace(dimension[0], "dimension = 96"), encoding="utf-8")
    with KnowledgeBase.open(root) as kb:
        before = kb.store.status().embeddings
        repaired = kb.verify(repair=True)
        assert any("embedder changed" in line for line in repaired.repaired)
        assert kb.store.status().embeddings == before


def test_rebuild_makes_a_fresh_store_and_reuses_every_readable_embedding(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    with KnowledgeBase.open(root) as kb:
        total = kb.store.status().embeddings
    _zero_a_leaf(root, "chunks")
    with KnowledgeBase.open(root) as kb:
        rebuilt = kb.rebuild()
        assert rebuilt.salvaged == total
        assert sum(s.embeddings_computed for s in rebuilt.result.sources) == 0
        assert rebuilt.reused > 0
        assert kb.verify().ok
        assert kb.search("harbour light")
        status = kb.store.status()
        assert status.documents == 120
        assert status.embeddings == total
    assert rebuilt.backup.exists()
    assert sorted(p.name for p in _db(root).parent.iterdir()) == [
        "kbsync.db", "kbsync.db.before-rebuild", "kbsync.db.lock"]


def _killed_rebuild(root: Path, tmp_path: Path) -> None:
    """Run `kbsync rebuild` in a child process and kill it (SIGKILL) as it swaps the new
    store in: the fresh store is complete, the old one untouched."""
    command = [sys.executable, "-m", "kbsync", "rebuild", "-c", str(root)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    record = tmp_path / "points"
    shutil.copy(_db(root), tmp_path / "before.db")
    rehearsal = subprocess.run(command, env={**env, ENV_RECORD: str(record)},
                               capture_output=True, check=False)
    assert rehearsal.returncode == 0, rehearsal.stderr
    shutil.copy(tmp_path / "before.db", _db(root))  # as it was before the rehearsal
    for leftover in _db(root).parent.glob("kbsync.db.before-rebuild*"):
        leftover.unlink()
    at = record.read_text(encoding="utf-8").splitlines().index("store.rebuild_backup") + 1
    killed = subprocess.run(command, env={**env, ENV_CRASH_AT: str(at)}, capture_output=True,
                            check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr


def test_what_a_killed_rebuild_left_is_removed_when_the_store_is_next_written(
        tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 12)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    _killed_rebuild(root, tmp_path)
    fresh = _db(root).with_name("kbsync.db.rebuild")
    assert fresh.stat().st_size > 0, "the kill left no rebuilt file"
    with KnowledgeBase.open(root) as kb:
        assert kb.search("harbour light")  # reading leaves it: no lock is taken
        assert fresh.exists()
        assert kb.sync().total("unchanged") == 12
        assert kb.verify().ok
    assert sorted(p.name for p in _db(root).parent.iterdir()) == ["kbsync.db", "kbsync.db.lock"]


def test_the_file_of_a_rebuild_is_kept_while_another_process_holds_the_writer_lock(
        tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 3)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
        fresh = _db(root).with_name("kbsync.db.rebuild")
        fresh.write_bytes(bytes(4096))  # as a rebuild running in that process has it
        with writer_lock(kb.config, wait=False):
            with pytest.raises(LockedError):
                kb.sync(wait=False)
            with KnowledgeBase.open(root) as other:
                assert other.status().documents == 3
            assert fresh.exists()
        kb.sync()
        assert not fresh.exists()


def test_a_rebuilt_store_keeps_every_erasure_so_no_erased_document_comes_back(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    with KnowledgeBase.open(root) as kb:
        key = kb.documents()[3].key
        assert kb.erase(key).documents
        kb.rebuild()
        assert len(kb.erasures()) == 1
        assert all(d.key != key for d in kb.documents())
        assert kb.sync().total("new") == 0


@pytest.mark.parametrize(("table", "damage"), [
    ("chunks_digest", _bad_child_pointer),
    ("chunk_fts_data", _zero_a_leaf),
    ("chunk_fts_content", _zero_a_leaf),
    ("chunk_texts", _zero_a_leaf),
    ("chunk_texts_key", _bad_child_pointer),
])
def test_repair_mends_damage_to_what_the_store_holds_twice(
        pristine: Path, tmp_path: Path, table: str,
        damage: Callable[[Path, str], None]) -> None:
    root = _copy(pristine, tmp_path)
    damage(root, table)
    with KnowledgeBase.open(root) as kb:
        found = kb.verify()
        assert any("store file is damaged" in line for line in found.problems)
        repaired = kb.verify(repair=True)
        assert repaired.ok, repaired.remaining
        assert kb.verify().ok
        assert kb.search("harbour light", mode="text")
        assert kb.store.status().documents == 120


def test_repair_says_when_only_a_rebuild_helps_and_the_rebuild_embeds_nothing(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    _zero_a_leaf(root, "chunks")
    run = _kbsync(root, "verify", "--repair")
    assert run.returncode == 4
    assert "Traceback" not in run.stderr
    assert "only a fresh store helps: `kbsync rebuild`" in run.stdout
    rebuilt = _kbsync(root, "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert ", 0 computed;" in rebuilt.stdout
    assert _kbsync(root, "verify").stdout.strip() == "ok: every invariant holds"


def test_a_store_whose_header_is_gone_says_how_to_start_again(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    size, _ = _pages(root, "chunks")
    _overwrite(root, 1, size, 0, bytes(100))  # the file header
    run = _kbsync(root, "status")
    assert run.returncode == 1
    assert "move it away and run `kbsync sync`" in _one_line_error(run, root)
