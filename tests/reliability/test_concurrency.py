"""Several processes on one knowledge base: one writer at a time, readers see whole commits."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.crashpoints import ENV_RECORD
from kbsync.store.sqlite import SqliteStore
from tests.reliability.harness import make_kb

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _kbsync(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kbsync", *args], env=kwargs.pop("env", ENV),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_second_sync_waits_for_the_first_or_exits_3_with_no_wait(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 60)
    record = tmp_path / "points.txt"
    first = _kbsync("sync", "-c", str(root), env={**ENV, ENV_RECORD: str(record)})
    # Freeze the first sync while it holds the lock, so the order is not left to timing;
    # once its pid is in the lock file (written just after the lock is taken).
    lock = root / ".kbsync" / "kbsync.db.lock"
    while not (record.exists() and "lock.acquired" in record.read_text()
               and lock.exists() and lock.read_text().strip() == str(first.pid)):
        assert first.poll() is None, first.communicate()
    first.send_signal(signal.SIGSTOP)
    try:
        no_wait = _kbsync("sync", "--no-wait", "-c", str(root))
        _, err = no_wait.communicate(timeout=60)
        assert no_wait.returncode == 3
        assert "another kbsync process" in err
        assert f"pid {first.pid}" in err
        waiting = _kbsync("sync", "-c", str(root))
        assert waiting.stderr is not None
        assert "waiting for another kbsync process" in waiting.stderr.readline()
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=120) == 0
    _, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    with KnowledgeBase.open(root) as kb:
        assert kb.verify().problems == ()
        assert kb.status().documents == 60


def test_four_processes_of_random_syncs_erases_and_searches_leave_a_sound_store(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", 40)  # no store yet: the four race to create it too
    workers = [subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.worker", str(root), str(seed), "20"],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) for seed in range(4)]
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert "database is locked" not in err
        assert "Traceback" not in err, err
        assert worker.returncode == 0, err
        assert len(out.split()) == 20
    with KnowledgeBase.open(root) as kb:
        assert kb.verify().problems == ()
        kb.sync(allow_mass_delete=True, wait=False)
        assert kb.verify().problems == ()
        # Erasures are remembered (one per erased key): those documents stay away until undone.
        erasures = kb.erasures()
        assert kb.status().documents == 40 - len(erasures)
        for erasure in erasures:
            kb.unerase(erasure.pattern)
        kb.sync(wait=False)
        assert kb.verify().problems == ()
        assert kb.status().documents == 40


def _generations(db: sqlite3.Connection) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each document's text and current chunk digests, read in one snapshot."""
    db.execute("BEGIN")
    try:
        texts = dict(db.execute(
            "SELECT d.key, t.text FROM documents d LEFT JOIN versions t ON t.doc_id = d.id "
            "AND t.generation = d.generation"))
        chunks: dict[str, list[str]] = {}
        for key, digest in db.execute(
            "SELECT d.key, c.digest FROM documents d JOIN chunks c ON c.doc_id = d.id "
            "AND c.generation = d.generation ORDER BY d.key, c.idx"
        ):
            chunks.setdefault(key, []).append(digest)
    finally:
        db.execute("COMMIT")
    return {key: (text, tuple(chunks.get(key, ()))) for key, text in texts.items()}


def test_readers_during_a_sync_see_only_whole_committed_generations(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 30)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    db_path = root / ".kbsync" / "kbsync.db"
    reader = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    old = _generations(reader)
    for i in range(30):
        path = root / "docs" / f"doc-{i:03d}.txt"
        path.write_text(path.read_text() + f"\nA closing line for number {i}.\n")

    seen: list[dict[str, tuple[str, tuple[str, ...]]]] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(_generations(reader))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        with KnowledgeBase.open(root) as kb:
            kb.sync()
    finally:
        done.set()
        thread.join()
    new = _generations(reader)
    reader.close()
    assert all(old[k] != new[k] for k in old)
    assert seen
    for view in seen:
        assert set(view) == set(old)
        for key, generation in view.items():
            assert generation in (old[key], new[key]), key


def test_a_new_store_opened_by_six_threads_at_once_opens_in_every_one(tmp_path: Path) -> None:
    # SQLite refused the switch to write-ahead logging at once, without waiting, to an
    # opener that had read the new file before another switched it: about one in a
    # hundred openers of a new store failed with "database is locked".
    failures: list[BaseException] = []

    def open_store(path: Path, start: threading.Barrier) -> None:
        start.wait()
        try:
            SqliteStore(path).close()
        except BaseException as exc:  # every failure is the finding
            failures.append(exc)

    for round_ in range(200):
        start = threading.Barrier(6)
        path = tmp_path / f"{round_}" / "kb.db"
        path.parent.mkdir()
        threads = [threading.Thread(target=open_store, args=(path, start)) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
