"""A store that cannot be written can still be searched, diffed and inspected.

As root, permission bits do not stop writes, so the store file and its folder
are made immutable (``chattr +i``) instead; the tests skip where that is refused.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.cli import app
from kbsync.errors import StoreError
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
        kb.sync(accept_replacements=True)  # a rewrite, not an edit: applied at once
    return root


@pytest.fixture(params=["chattr +i", "read-only mount"])
def immutable(synced: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A copy of the knowledge base that cannot be written: its state folder and store
    file made immutable, or the whole folder seen through a read-only bind mount."""
    root = tmp_path / "kb"
    shutil.copytree(synced, root)
    if request.param == "chattr +i":
        state = root / ".kbsync"
        undo = [["chattr", "-i", str(state / "kbsync.db"), str(state)]]
        steps = [["chattr", "+i", str(state / "kbsync.db"), str(state)]]
    else:
        view = tmp_path / "view"
        view.mkdir()
        steps = [["mount", "--bind", str(root), str(view)],
                 ["mount", "-o", "remount,bind,ro", str(view)]]
        undo = [["umount", str(view)]]
        root = view
    if shutil.which(steps[0][0]) is None:
        pytest.skip(f"no {steps[0][0]} command")
    done = 0
    try:
        for step in steps:
            made = subprocess.run(step, capture_output=True, check=False)
            if made.returncode != 0:
                pytest.skip(f"{request.param} is not possible here: "
                            f"{made.stderr.decode().strip()}")
            done += 1
        yield root
    finally:
        if done:
            for step in undo:
                subprocess.run(step, check=False)


def _kbsync(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the command line in this process, as ``kbsync ARGS -c ROOT`` would."""
    result = CliRunner().invoke(app, [*args, "-c", str(root)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def test_an_immutable_store_is_searched_diffed_and_inspected(immutable: Path) -> None:
    for args in (("status",), ("search", "keeper bell"), ("diff", "doc-001.txt"),
                 ("verify",), ("plan",)):
        run = _kbsync(immutable, *args)
        assert run.returncode == 0, (args, run.stderr)
        assert "not a kbsync store" not in run.stderr
    with KnowledgeBase.open(immutable) as kb:
        # Hybrid: over six generated documents full text alone cannot rank (every word is
        # in most of them), and the hashing embedder's default mode is full text.
        assert kb.search("keeper bell", k=1, mode="hybrid")[0].key == "doc-001.txt"
        assert kb.diff("doc-001.txt").change is not None
        assert [d.key for d in kb.documents()][:1] == ["doc-000.txt"]


def test_writing_commands_on_an_immutable_store_fail_in_one_line(immutable: Path) -> None:
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
