"""A full disk or a failing write: a clear error, the store intact, and the next run converges."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from kbsync import crashpoints
from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import add_source, load_config
from kbsync.errors import ConfigError, StoreError
from tests.reliability.harness import (
    clone,
    dump,
    make_kb,
    record_scenario,
    recover,
    save_result,
    text_of,
)


def test_an_io_error_at_a_write_step_is_a_store_error_and_the_next_run_converges(
    scratch: Path,
) -> None:
    steps = record_scenario(scratch)
    tried = 0
    for step in steps:
        # Each kind of write step where it first comes, and every 12th step besides.
        first = {name: n for n, name in reversed(list(enumerate(step.points, 1)))}
        for n in sorted(set(first.values()) | set(range(1, len(step.points) + 1, 12))):
            work = scratch / "failed"
            clone(step.before, work)
            crashpoints.arm(fail_at=n)
            try:
                if step.points[n - 1] == "lock.acquired":
                    step.operation(work)  # the lock's holder note is a hint: may fail quietly
                else:
                    with pytest.raises(StoreError, match="injected I/O error"):
                        step.operation(work)
            finally:
                crashpoints.disarm()
            with KnowledgeBase.open(work) as kb:
                assert kb.verify().problems == (), (step.name, n, step.points[n - 1])
            assert recover(work, step) == [], (step.name, n, step.points[n - 1])
            shutil.rmtree(work)
            tried += 1
    assert tried > 40
    save_result("io_errors", {"write_steps_failed": tried,
                              "write_steps": sum(len(step.points) for step in steps)})


def _grow(docs: Path, start: int, count: int) -> None:
    for i in range(start, start + count):
        (docs / f"doc-{i:03d}.txt").write_text(text_of(i, 600), encoding="utf-8")


def test_a_disk_that_fills_up_mid_sync_leaves_the_store_intact_and_the_next_sync_converges(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", 10)
    with KnowledgeBase.open(root) as kb:
        kb.sync()
    _grow(root / "docs", 10, 40)
    with KnowledgeBase.open(root) as kb:
        # A page limit on this connection is a disk that fills up after a few pages.
        db = kb.store._db
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages + 12}")
        with pytest.raises(StoreError, match="full"):
            kb.sync()
        assert kb.verify().problems == ()
        partly = kb.status().documents
    assert 10 <= partly < 50
    with KnowledgeBase.open(root) as kb:  # space again (a new connection: no limit)
        report = kb.sync(wait=False)
        assert report.total("new") == 50 - partly
        assert kb.verify().problems == ()
    fresh = tmp_path / "fresh"
    clone(root, fresh)
    shutil.rmtree(fresh / ".kbsync")
    with KnowledgeBase.open(fresh) as kb:
        kb.sync()
    assert dump(root / ".kbsync" / "kbsync.db") == dump(fresh / ".kbsync" / "kbsync.db")


def test_a_failing_fsync_leaves_the_old_configuration_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = make_kb(tmp_path / "kb", 1)
    (root / "more").mkdir()
    before = (root / "kbsync.toml").read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ConfigError, match="No space left"):
        add_source(load_config(root), "more")
    monkeypatch.undo()
    assert (root / "kbsync.toml").read_bytes() == before
    assert not [p.name for p in root.iterdir() if p.name.endswith(".tmp")]
    assert [s.name for s in add_source(load_config(root), "more").sources] == ["docs", "more"]


def test_a_disk_too_full_for_the_lock_note_still_lets_a_sync_and_gc_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = make_kb(tmp_path / "kb", 5)
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if Path(f"/proc/self/fd/{fd}").resolve().name == "kbsync.db.lock":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    with KnowledgeBase.open(root) as kb:
        assert kb.sync().total("new") == 5
        kb.gc()
        assert kb.verify().problems == ()
