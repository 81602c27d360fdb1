"""Damaged store files: found by verify, told in one line, repaired or rebuilt.

The damage is real: bytes of a copy of a real store are overwritten at a page
found from ``PRAGMA page_size`` and the b-tree's pages in ``dbstat``: a page made
malformed, or a value inside a well-formed page (a vector, a chunk text, a kept text),
which breaks no link and only the checks of stored values find.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.cli import app
from kbsync.crashpoints import ENV_CRASH_AT, ENV_RECORD
from kbsync.engine import writer_lock
from kbsync.errors import LockedError, StoreError
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


# -- damage inside stored values: no page is malformed, a value is wrong ------------------

def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _one(root: Path, sql: str, *args: object) -> tuple[Any, ...]:
    db = sqlite3.connect(_db(root))
    try:
        row = db.execute(sql, args).fetchone()
    finally:
        db.close()
    assert row is not None
    return tuple(row)


def _overwrite_in(root: Path, table: str, old: bytes, new: bytes) -> None:
    """Overwrite the bytes ``old`` where they lie in a page of ``table``'s b-tree, in place:
    the page stays well formed, only the value is wrong (as a bit flip leaves it)."""
    assert len(old) == len(new)
    size, pages = _pages(root, table)
    data = _db(root).read_bytes()
    for page, _ in pages:
        at = data.find(old, (page - 1) * size, page * size)
        if at >= 0:
            with open(_db(root), "r+b") as f:
                f.seek(at)
                f.write(new)
            return
    raise AssertionError(f"the value is in no page of {table}")


_FIRST_CHUNK = ("SELECT c.digest FROM chunks c JOIN documents d ON c.doc_id = d.id "
                "AND c.generation = d.generation ORDER BY d.key, c.idx LIMIT 1")


def _overwrite_a_vector(root: Path, value: float) -> str:
    """Overwrite the vector of the first document's first chunk with ``value`` everywhere;
    its digest."""
    (digest,) = _one(root, _FIRST_CHUNK)
    (vector,) = _one(root, "SELECT vector FROM embeddings WHERE digest = ?", digest)
    damaged = np.full(len(vector) // 4, value, dtype=np.float32).tobytes()
    _overwrite_in(root, "embeddings", vector, damaged)
    return str(digest)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_vector_overwritten_with_1000s_fails_verify_is_never_ranked_and_is_embedded_again(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    digest = _overwrite_a_vector(root, 1000.0)
    # Before anything checked the store: the damaged vector (norm 8,000, scoring in the
    # thousands) is left out of every vector search, which says so in one line.
    for mode in ("vector", "hybrid"):
        run = _kbsync(root, "search", "harbour light keeper", "--mode", mode, "--json")
        assert run.returncode == 0, run.stderr
        found = json.loads(run.stdout)
        assert digest not in {h["digest"] for h in found["hits"]}
        assert all(h["score"] < 100 for h in found["hits"])
        assert len(found["warnings"]) == 1
        assert "left out 1 chunk whose vector is damaged" in found["warnings"][0]
        assert _lines(run.stderr) == [f"warning: {found['warnings'][0]}"]
    verify = _kbsync(root, "verify")
    assert verify.returncode == 4
    assert _lines(verify.stdout) == [
        f"vector of chunk {digest[:12]} (hashing-v1:stemmed-unigram+bigram:log-tf:64): "
        "norm 8000, where the embedder's is 1 (or 0) (damaged)"]
    # Known damage: writes wait for the repair, reads warn in one line.
    before = _digest(_db(root).read_bytes())
    (root / "docs" / "doc-000.txt").write_text("A new first line.\n", encoding="utf-8")
    sync = _kbsync(root, "sync")
    assert sync.returncode == 1
    error = _one_line_error(sync, root)
    assert "known to be damaged" in error
    assert "kbsync verify --repair" in error
    assert _digest(_db(root).read_bytes()) == before
    status = _kbsync(root, "status", "--json")
    assert "known to be damaged" in json.loads(status.stdout)["damage"]
    assert len(_lines(status.stderr)) == 1
    repair = _kbsync(root, "verify", "--repair")
    assert repair.returncode == 0, repair.stdout
    assert ("repair: discarded 1 damaged vectors (those of current chunks embedded again "
            "below)") in repair.stdout
    assert "repair: embedded 1 chunks that had no vector" in repair.stdout
    assert _kbsync(root, "verify").stdout.strip() == "ok: every invariant holds"
    assert _kbsync(root, "sync").returncode == 0
    again = _kbsync(root, "search", "harbour light keeper", "--mode", "vector", "--json")
    assert json.loads(again.stdout)["warnings"] == []
    assert not again.stderr.strip()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.5])
def test_a_vector_that_is_not_finite_or_not_of_unit_length_fails_verify(
        pristine: Path, tmp_path: Path, value: float) -> None:
    root = _copy(pristine, tmp_path)
    digest = _overwrite_a_vector(root, value)
    with KnowledgeBase.open(root) as kb:
        found = kb.verify().problems
        assert len(found) == 1
        assert f"vector of chunk {digest[:12]}" in found[0]
        assert ("not finite" in found[0]) == (value != 0.5)
        hits = kb.search("harbour light keeper", k=200, mode="vector", context_tokens=0)
        assert digest not in {h.digest for h in hits}
        assert kb.verify(repair=True).ok


def test_a_chunk_text_overwritten_fails_verify_and_repair_cuts_it_again(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    (digest,) = _one(root, _FIRST_CHUNK)
    (text,) = _one(root, "SELECT text FROM chunk_texts WHERE digest = ?", digest)
    original = text.encode()
    _overwrite_in(root, "chunk_texts", original, original[:20] + b"X" * 8 + original[28:])
    with KnowledgeBase.open(root) as kb:
        found = kb.verify()
        assert found.problems == (f"chunk {digest[:12]}: its digest does not match its text "
                                  "(damaged)",)
        assert kb.damage is not None
        with pytest.raises(StoreError, match="known to be damaged"):
            kb.sync()
        repaired = kb.verify(repair=True)
        assert repaired.ok, repaired.remaining
        assert "discarded 1 damaged chunk texts (cut again from their documents' text)" in \
            repaired.repaired
        assert "rebuilt the chunk texts (1 restored from the documents' text)" in \
            repaired.repaired
        assert kb.damage is None
        assert kb.verify().ok
        # Its full-text row is made again from the restored text.
        words = " ".join(text.split()[2:8])
        assert [h.text for h in kb.search(words, k=500, mode="text", context_tokens=0)
                if h.digest == digest] == [text]
        assert kb.sync().total("modified") == 0


def test_a_current_text_overwritten_fails_verify_and_repair_reads_it_again(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    key = "doc-007.txt"
    (text,) = _one(root, "SELECT CAST(v.text AS TEXT) FROM versions v JOIN documents d "
                         "ON d.id = v.doc_id AND v.generation = d.generation WHERE d.key = ?",
                   key)
    original = text.encode()
    damaged = original[:40] + b"Z" * 8 + original[48:]
    _overwrite_in(root, "versions", original, damaged)
    found = _kbsync(root, "verify")
    assert found.returncode == 4
    assert _lines(found.stdout) == [
        f"docs:{key}: the text of its current version (generation 1) does not match its "
        "checksum (damaged)"]
    diff = _kbsync(root, "diff", key)
    assert diff.returncode == 0
    assert len(_lines(diff.stderr)) == 1
    assert "known to be damaged" in diff.stderr
    with KnowledgeBase.open(root) as kb:
        repaired = kb.verify(repair=True)
        assert repaired.ok, repaired.remaining
        assert "discarded 1 damaged current texts (read again from their sources)" in \
            repaired.repaired
        assert kb.verify().ok
        assert kb.document(key).text == text
        assert kb.sync().total("modified") == 0


def test_a_previous_text_overwritten_fails_verify_and_repair_lets_it_go(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    key = "doc-003.txt"
    path = root / "docs" / key
    old = path.read_text(encoding="utf-8")
    path.write_text(old + "\nOne more line about the harbour.\n", encoding="utf-8")
    with KnowledgeBase.open(root) as kb:
        assert kb.sync().total("modified") == 1
    (text,) = _one(root, "SELECT CAST(v.text AS TEXT) FROM versions v JOIN documents d "
                         "ON d.id = v.doc_id AND v.generation = d.generation - 1 "
                         "WHERE d.key = ?", key)
    original = text.encode()
    _overwrite_in(root, "versions", original, b"Q" * 8 + original[8:])
    with KnowledgeBase.open(root) as kb:
        assert kb.verify().problems == (
            f"docs:{key}: the text of its previous version (generation 1) does not match "
            "its checksum (damaged)",)
        repaired = kb.verify(repair=True)
        assert repaired.ok, repaired.remaining
        assert kb.diff(key).previous is None
        assert kb.sync().total("modified") == 0


def test_a_damaged_page_of_the_embeddings_keeps_the_readable_vectors_and_embeds_the_rest(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    with KnowledgeBase.open(root) as kb:
        total = kb.store.status().embeddings
    _zero_a_leaf(root, "embeddings")
    # A vector search reads every vector: SQLite reports the damage, which is remembered.
    search = _kbsync(root, "search", "harbour light", "--mode", "vector")
    assert search.returncode == 1
    assert "malformed" in _one_line_error(search, root)
    before = _digest(_db(root).read_bytes())
    sync = _kbsync(root, "sync")
    assert sync.returncode == 1
    assert "known to be damaged (the database reported damage" in _one_line_error(sync, root)
    assert _digest(_db(root).read_bytes()) == before
    with KnowledgeBase.open(root) as kb:
        assert any("store file is damaged" in line for line in kb.verify().problems)
        repaired = kb.verify(repair=True)
        assert repaired.ok, repaired.remaining
        embedded = [line for line in repaired.repaired if line.startswith("embedded ")]
        assert len(embedded) == 1
        assert kb.verify().ok
        assert kb.store.status().embeddings == total
        assert kb.search("harbour light", mode="vector")
        assert kb.sync().total("new") == 0


def test_a_full_revalidation_checks_the_file_before_it_writes(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    _zero_a_leaf(root, "embeddings")  # a page no plain sync of unchanged files reads
    (root / "docs" / "doc-001.txt").write_text("An edit of the second file.\n",
                                               encoding="utf-8")
    before = _digest(_db(root).read_bytes())
    run = _kbsync(root, "sync", "--verify")
    assert run.returncode == 1
    error = _one_line_error(run, root)
    assert "quick_check found the store file is damaged" in error
    assert _digest(_db(root).read_bytes()) == before
    assert _kbsync(root, "sync").returncode == 1  # remembered: no plain sync writes either


def test_a_note_of_damage_beside_a_store_that_was_moved_away_is_forgotten(
        pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    _overwrite_a_vector(root, 1000.0)
    assert _kbsync(root, "verify").returncode == 4
    note = _db(root).with_name("kbsync.db.damaged")
    assert note.exists()
    assert "verify found damaged values: 1 vectors" in note.read_text(encoding="utf-8")
    for path in _db(root).parent.glob("kbsync.db*"):
        if path.name != "kbsync.db.damaged" and not path.name.endswith(".lock"):
            path.rename(tmp_path / path.name)
    assert _kbsync(root, "sync").returncode == 0  # a new store, which nothing is known of
    assert not note.exists()


def test_a_repair_says_which_cached_vectors_it_could_not_embed_again(
        pristine: Path, tmp_path: Path) -> None:
    """The cache went from 1,267 to 1,256 vectors in a repair that said nothing of it: a
    damaged vector of a chunk no current document holds is discarded and not embedded
    again, as only current chunks are."""
    root = _copy(pristine, tmp_path)
    _overwrite_a_vector(root, 1000.0)
    first = min((root / "docs").iterdir())
    first.write_text("A new first paragraph about tides and harbours.\n\n"
                     + first.read_text(encoding="utf-8"), encoding="utf-8")
    with KnowledgeBase.open(root) as kb:
        assert kb.sync(accept_replacements=True).total("modified") == 1
        total = kb.store.status().embeddings
        repaired = kb.verify(repair=True)
        assert repaired.ok, repaired.remaining
        assert kb.store.status().embeddings == total - 1
    said = [line for line in repaired.repaired if "embedding cache" in line]
    assert said == [f"the embedding cache holds 1 vectors fewer ({total:,} -> {total - 1:,}): "
                    "damaged or unreadable vectors of chunks no current document holds, not "
                    "embedded again (a sync embeds a text again if it comes back)"]
