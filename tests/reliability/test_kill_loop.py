"""kill -9 loop: a real `kbsync sync` process killed at a random moment, again and again.

After every kill the store must verify (no orphans, no duplicates, no chunk
without its vector), the writer lock must be free and no temp file may be left.
At the end one uninterrupted sync must give the same content as a fresh store.
``KBSYNC_KILL_LOOPS`` sets the number of iterations (CI default below).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.crashpoints import ENV_RECORD
from kbsync.store.lock import WriterLock
from tests.reliability.harness import clone, make_kb, save_result, text_of

LOOPS = int(os.environ.get("KBSYNC_KILL_LOOPS", "100"))
STATE_FILES = {"kbsync.db", "kbsync.db-wal", "kbsync.db-shm", "kbsync.db.lock"}


def _change(docs: Path, rng: random.Random, serial: int) -> None:
    """Edits of random size, so that kills land in reading, embedding or applying."""
    files = sorted(docs.iterdir())
    for path in rng.sample(files, rng.choice([0, 3, 10, 40])):
        body = path.read_text(encoding="utf-8")
        at = body.index(". ") + 1
        path.write_text(f"{body[:at]} Shift {serial} rings the bell.{body[at:]}", encoding="utf-8")
    for path in rng.sample(files, rng.choice([0, 1, 3])):
        path.unlink(missing_ok=True)
    for n in range(rng.choice([0, 2, 6])):
        (docs / f"new-{serial}-{n}.txt").write_text(text_of(1000 * serial + n), encoding="utf-8")
    if rng.random() < 0.5:
        path = rng.choice(sorted(docs.iterdir()))
        path.rename(path.with_name(f"moved-{serial}-{path.name}"))


def _current(db_path: Path) -> tuple[list[tuple[str, str]], list[str], int]:
    """Documents with their text hash, current chunk digests in order, and their vectors."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        docs = sorted(db.execute("SELECT key, text_hash FROM documents"))
        chunks = [r[0] for r in db.execute(
            "SELECT d.key || ':' || c.idx || ':' || c.digest FROM documents d JOIN chunks c "
            "ON c.doc_id = d.id AND c.generation = d.generation ORDER BY d.key, c.idx")]
        vectors = db.execute(
            "SELECT count(DISTINCT e.digest) FROM embeddings e JOIN chunks c USING (digest) "
            "JOIN documents d ON c.doc_id = d.id AND c.generation = d.generation").fetchone()[0]
        return docs, sorted(chunks), vectors
    finally:
        db.close()


def _wait_for(record: Path, mark: str, process: subprocess.Popen[bytes],
              deadline: float = float("inf")) -> bool:
    """Wait until the process reached a crash point named ``mark``; False at the deadline."""
    while process.poll() is None and time.perf_counter() < deadline:
        if record.exists() and mark in record.read_text(encoding="utf-8"):
            return True
        time.sleep(0.005)
    return process.poll() is not None


def test_syncs_killed_at_random_moments_always_leave_a_sound_store(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 200)
    rng = random.Random(20261129)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    record = tmp_path / "points.txt"
    # Seconds from the moment a run is watched to the release of its lock, per kind of
    # iteration, learnt: shorter when a run's writes end before its kill, longer otherwise.
    estimate = {"lock.acquired": 1.0, "store.begin": 0.5}
    phases: Counter[str] = Counter()
    finished = 0
    started = time.perf_counter()
    for serial in range(LOOPS):
        if serial:
            _change(root / "docs", rng, serial)
        record.unlink(missing_ok=True)
        process = subprocess.Popen(
            [sys.executable, "-m", "kbsync", "sync", "-c", str(root), "--json"],
            env={**env, ENV_RECORD: str(record)},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        # Interpreter start-up writes nothing. Even iterations draw the moment from the
        # whole run after it took the lock (reading, chunking, embedding, applying); odd
        # ones from the part after its first transaction began (applying).
        mark = "lock.acquired" if serial % 2 == 0 else "store.begin"
        _wait_for(record, mark, process)
        begin = time.perf_counter()
        if _wait_for(record, "lock.release", process,
                     deadline=begin + rng.uniform(0.0, estimate[mark])):
            estimate[mark] = 1.2 * (time.perf_counter() - begin)  # its writes ended first
        else:
            process.send_signal(signal.SIGKILL)
            estimate[mark] *= 1.25
        _, err = process.communicate()
        if process.returncode == -signal.SIGKILL:
            phases[record.read_text(encoding="utf-8").split()[-1]] += 1
        else:  # it ended first (perhaps just before the signal)
            assert process.returncode == 0, err.decode()
            finished += 1
            phases["finished"] += 1

        with KnowledgeBase.open(root) as kb:
            assert kb.verify().problems == (), f"iteration {serial}"
        lock = WriterLock(root / ".kbsync" / "kbsync.db.lock", wait=False)
        lock.acquire()  # raises LockedError if the killed process left it held
        lock.release()
        left = {p.name for p in (root / ".kbsync").iterdir()} - STATE_FILES
        assert not left, f"iteration {serial}: leftover files {left}"
        assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]

    with KnowledgeBase.open(root) as kb:
        kb.sync(allow_mass_delete=True, wait=False)
        assert kb.verify().problems == ()
    fresh = tmp_path / "fresh"
    clone(root, fresh)
    for path in (fresh / ".kbsync").iterdir():
        path.unlink()
    with KnowledgeBase.open(fresh) as kb:
        kb.sync()
    assert _current(root / ".kbsync" / "kbsync.db") == _current(fresh / ".kbsync" / "kbsync.db")

    seconds = time.perf_counter() - started
    save_result("kill_loop", {"iterations": LOOPS, "killed": LOOPS - finished,
                              "finished_before_the_kill": finished,
                              "documents": 200, "seconds": round(seconds, 1),
                              "last_point_before_the_kill": dict(phases.most_common())})
    print(f"\nkill -9 loop: {LOOPS} iterations, {LOOPS - finished} killed mid-run, "
          f"all verified ({seconds:.0f} s)")
