"""A sync's scratch file: nothing left behind by a kill, a full disk told in one line."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.errors import StoreError
from kbsync.sync import scratch as scratch_module
from kbsync.sync.scratch import Scratch, remove_stale
from tests.reliability.harness import make_kb, text_of


def _killed_between_create_and_unlink(folder: Path) -> None:
    """A child process that makes a scratch file and is killed before it unlinks it."""
    pid = os.fork()
    if pid == 0:  # the child: SIGKILL right after SQLite opened the named file
        real = sqlite3.connect

        def connect_then_die(*args: object, **kwargs: object) -> sqlite3.Connection:
            db = real(*args, **kwargs)  # type: ignore[call-overload]
            os.kill(os.getpid(), signal.SIGKILL)
            return db  # type: ignore[no-any-return]

        scratch_module.sqlite3.connect = connect_then_die  # type: ignore[assignment]
        try:
            Scratch(folder)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    assert os.WTERMSIG(status) == signal.SIGKILL


def test_a_scratch_file_left_by_a_killed_sync_is_gone_once_the_store_is_opened(
        tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 3)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    state = root / ".kbsync"
    _killed_between_create_and_unlink(state)
    assert [p.name for p in state.glob("kbsync-scratch-*.db")], "the kill left no file"
    with KnowledgeBase.open(root) as kb:
        assert kb.verify().ok
    assert not list(state.glob("kbsync-scratch-*.db"))


def test_the_scratch_file_of_a_running_sync_is_not_removed(tmp_path: Path) -> None:
    live = tmp_path / "kbsync-scratch-live.db"
    stale = tmp_path / "kbsync-scratch-stale.db"
    other = tmp_path / "notes.db"
    for path in (live, stale, other):
        path.write_bytes(b"")
    fd = os.open(live, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as the live sync's process holds its file
        assert remove_stale(tmp_path) == 1
        assert live.exists()
        assert other.exists()
        assert not stale.exists()
    finally:
        os.close(fd)
    assert remove_stale(tmp_path) == 1
    assert not live.exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Path:
    """An 8 MB file system (tmpfs), where mounting one is allowed."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command to make a small file system")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)],
                          capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_full_disk_at_the_scratch_file_is_one_line_naming_it(small_disk: Path) -> None:
    root = make_kb(small_disk / "kb", 5)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    for n in range(400):
        (root / "docs" / f"more-{n:03d}-{'x' * 120}.txt").write_text(text_of(n, 20),
                                                                   encoding="utf-8")
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:  # fill the disk up, then give back a few pages
        while True:
            os.write(fd, bytes(4096))
    except OSError:
        os.ftruncate(fd, os.fstat(fd).st_size - 48 * 1024)
    finally:
        os.close(fd)
    run = subprocess.run([sys.executable, "-m", "kbsync", "sync", "-c", str(root), "--json"],
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 1, run.stderr
    assert run.stderr == ""  # under --json the error is the JSON object alone
    message = json.loads(run.stdout)["error"]["message"]  # one object, the error alone
    assert "\n" not in message
    assert "disk is full" in message
    assert str(root / ".kbsync") in message
    assert not list((root / ".kbsync").glob("kbsync-scratch-*.db"))


def test_a_scratch_folder_that_cannot_be_written_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="scratch file"):
        Scratch(tmp_path / "missing")
