"""A store that cannot be written can still be searched, diffed and inspected.

As root, permission bits do not stop writes, so the store file and its folder
are made immutable (``chattr +i``) instead; the tests skip where that is refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbsync.errors import StoreError
from kbsync.knowledge_base import KnowledgeBase
from kbsync.store.sqlite import SqliteStore
from tests.reliability.harness import make_kb


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_kb(tmp_path_factory.mktemp("readonly") / "kb", 6)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    (root / "docs" / "doc-001.txt").write_text("Document 1\n\nThe keeper rings the bell.\n",
                                               encoding="utf-8")
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    return root


@pytest.fixture
def immutable(synced: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the knowledge base whose state folder and store file are immutable."""
    root = tmp_path / "kb"
    shutil.copytree(synced, root)
    state = root / ".kbsync"
    targets = [state / "kbsync.db", state]
    if shutil.which("chattr") is None:
        pytest.skip("no chattr command")
    made = subprocess.run(["chattr", "+i", *map(str, targets)], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {made.stderr.decode().strip()}")
    try:
        yield root
    finally:
        subprocess.run(["chattr", "-i", *map(str, targets)], check=False)


def _kbsync(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbsync", *args, "-c", str(root)],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                          capture_output=True, text=True, timeout=120, check=False)


def test_an_immutable_store_is_searched_diffed_and_inspected(immutable: Path) -> None:
    for args in (("status",), ("search", "keeper bell"), ("diff", "doc-001.txt"),
                 ("verify",)):
        run = _kbsync(immutable, *args)
        assert run.returncode == 0, (args, run.stderr)
        assert "not a kbsync store" not in run.stderr
    with KnowledgeBase.open(immutable) as kb:
        assert kb.search("keeper bell", k=1)[0].key == "doc-001.txt"
        assert kb.diff("doc-001.txt").change is not None
        assert [d.key for d in kb.documents()][:1] == ["doc-000.txt"]


def test_writing_commands_on_an_immutable_store_fail_in_one_line(immutable: Path) -> None:
    (immutable / "docs" / "doc-002.txt").unlink()
    for args in (("sync",), ("gc",), ("erase", "doc-003.txt")):
        run = _kbsync(immutable, *args)
        assert run.returncode == 1, (args, run.stdout)
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1, run.stderr
        assert "Traceback" not in run.stderr
        assert "read-only" in lines[0]
        assert str(immutable / ".kbsync") in lines[0]
    with KnowledgeBase.open(immutable) as kb:
        assert kb.status().documents == 6


def test_a_store_opened_read_only_reads_and_refuses_writes(synced: Path) -> None:
    store = SqliteStore(synced / ".kbsync" / "kbsync.db", read_only=True)
    try:
        assert store.read_only
        assert store.status().documents == 6
        assert store.search_text("keeper bell", 1)
        with pytest.raises(StoreError, match="read-only"):
            store.set_meta("probe", "1")
    finally:
        store.close()
