"""kill -9 loop on the parallel driver: `kbsync sync --workers 2` killed at random, again and again.

The whole process group dies at once (the coordinator and its worker, as a kill
from a terminal or of a container does). After every kill the store must verify,
the writer lock must be free once the server has ended the dead connections, and
no scratch file may be left; a sync that was not killed must have succeeded. At
the end one uninterrupted parallel sync must give the same content as a fresh
single-process sync of the same files.
``KBSYNC_PARALLEL_KILL_LOOPS`` sets the number of iterations (CI default below).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.crashpoints import ENV_RECORD
from kbsync.store.postgres import AdvisoryLock
from tests.reliability.harness import clone, make_kb, save_result
from tests.reliability.parallel_harness import SCHEMA, Databases, content, use_database
from tests.reliability.test_kill_loop import _change, _wait_for

LOOPS = int(os.environ.get("KBSYNC_PARALLEL_KILL_LOOPS", "10"))
DOCUMENTS = 200


@pytest.fixture
def databases(postgres_url: str) -> Iterator[Databases]:
    found = Databases(postgres_url, f"kbkill_{os.getpid()}")
    try:
        yield found
    finally:
        found.close()


def _others(url: str) -> int:
    """Connections to the database but this one's: those of a killed sync linger until
    the server has seen them close and rolled their transactions back."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND pid != pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])


def _settled(url: str) -> None:
    """Wait until the server let go of every connection of the killed processes."""
    deadline = time.monotonic() + 120  # not a margin: a bound on a hang
    while _others(url):
        assert time.monotonic() < deadline, "connections of a killed sync never ended"
        time.sleep(0.02)


def test_parallel_syncs_killed_at_random_moments_always_leave_a_sound_store(
    tmp_path: Path, databases: Databases,
) -> None:
    root = make_kb(tmp_path / "kb", DOCUMENTS)
    url = databases.create("kb")
    use_database(root, url)
    rng = random.Random(20261202)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    record = tmp_path / "points.txt"
    # Seconds from the moment a run is watched to the release of its lock, learnt, as in
    # test_kill_loop.py: even iterations from the lock on (listing, queueing, the
    # documents, deletions, boilerplate), odd ones from the first claim (the documents).
    estimate = {"lock.acquired": 2.0, "queue.claim": 1.0}
    phases: Counter[str] = Counter()
    finished = 0
    started = time.perf_counter()
    for serial in range(LOOPS):
        if serial:
            _change(root / "docs", rng, serial)
        record.unlink(missing_ok=True)
        process = subprocess.Popen(
            [sys.executable, "-m", "kbsync", "sync", "--workers", "2", "--json",
             "-c", str(root)],
            env={**env, ENV_RECORD: str(record)}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        mark = "lock.acquired" if serial % 2 == 0 else "queue.claim"
        _wait_for(record, mark, process)
        begin = time.perf_counter()
        if _wait_for(record, "lock.release", process,
                     deadline=begin + rng.uniform(0.0, estimate[mark])):
            estimate[mark] = 1.2 * (time.perf_counter() - begin)
        else:
            os.killpg(process.pid, signal.SIGKILL)  # the coordinator and its worker
            estimate[mark] *= 1.25
        _, err = process.communicate()
        if process.returncode == -signal.SIGKILL:
            phases[record.read_text(encoding="utf-8").split()[-1]] += 1
        else:  # it ended first (perhaps just before the signal)
            assert process.returncode == 0, err.decode()
            finished += 1
            phases["finished"] += 1
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # a worker left of a finished run

        _settled(url)
        with KnowledgeBase.open(root) as kb:
            assert kb.verify().problems == (), f"iteration {serial}"
        lock = AdvisoryLock(url, None, SCHEMA, wait=False)
        lock.acquire()  # raises LockedError if the lock outlived the killed processes
        lock.release()
        state = root / ".kbsync"
        left = list(state.iterdir()) if state.exists() else []
        assert not left, f"iteration {serial}: leftover files {left}"

    with KnowledgeBase.open(root) as kb:
        assert not kb.sync(allow_mass_delete=True, wait=False, workers=2).failed
        assert kb.verify().problems == ()
    fresh = tmp_path / "fresh"
    clone(root, fresh)
    fresh_url = databases.create("fresh")
    use_database(fresh, fresh_url)
    with KnowledgeBase.open(fresh) as kb:
        kb.sync()
    assert content(url) == content(fresh_url)

    seconds = time.perf_counter() - started
    save_result("kill_loop_parallel", {
        "iterations": LOOPS, "killed": LOOPS - finished, "finished_before_the_kill": finished,
        "documents": DOCUMENTS, "workers": 2, "seconds": round(seconds, 1),
        "last_point_before_the_kill": dict(phases.most_common())})
    print(f"\nparallel kill -9 loop: {LOOPS} iterations, {LOOPS - finished} killed mid-run, "
          f"all verified ({seconds:.0f} s)")
