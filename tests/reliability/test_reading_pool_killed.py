"""A sync killed outright while its reading processes work leaves none of them behind.

Before, they waited for work forever: holding the pipes of the sync's output (whoever
read it waited too) and the writer lock they had inherited (the next sync waited too).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbsync.store.lock import WriterLock
from tests.reliability.harness import make_kb

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(),
                                reason="finds the readers through /proc")


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.update(int(c) for c in (task / "children").read_text().split())
        except OSError:  # the task ended meanwhile
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_sync_killed_while_reading_leaves_no_reader_behind(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 1500, words=400)
    with (root / "kbsync.toml").open("a", encoding="utf-8") as config:
        config.write("\n[index]\nread_workers = 2\n")
    sync = subprocess.Popen([sys.executable, "-m", "kbsync", "sync", "-c", str(root), "--yes"],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    readers: set[int] = set()
    deadline = time.monotonic() + 120  # bounds a broken run; nothing waits on it otherwise
    while len(readers) < 2 and sync.poll() is None and time.monotonic() < deadline:
        readers = {c for c in _children(sync.pid) if _alive(c)}
        time.sleep(0.005)
    assert len(readers) >= 2, "the sync ended before its readers were seen"
    sync.send_signal(signal.SIGKILL)
    sync.communicate(timeout=120)  # returns once no reader holds its pipes
    assert sync.returncode == -signal.SIGKILL
    while any(_alive(r) for r in readers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(_alive(r) for r in readers)
    lock = WriterLock(root / ".kbsync" / "kbsync.db.lock", wait=False)
    lock.acquire()  # raises LockedError if a reader kept the lock held
    lock.release()
