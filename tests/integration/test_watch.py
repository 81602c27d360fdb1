from __future__ import annotations

import threading
import time
from pathlib import Path

from kbsync.app.knowledge_base import KnowledgeBase, SyncResult
from kbsync.app.watch import watch
from kbsync.engine import init_config


def test_a_file_change_triggers_a_sync_and_the_schedule_runs_a_full_revalidation(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nFirst words about harbours and lights.\n")
    init_config(tmp_path, ["docs"])
    seen: list[tuple[str, int]] = []
    stop = threading.Event()
    with KnowledgeBase.open(tmp_path) as engine:
        def record(report: SyncResult, reason: str) -> None:
            seen.append((reason, report.total("new") + report.total("modified")))

        worker = threading.Thread(target=engine.watch, kwargs={
            "interval": 3600, "full_every": 7200, "stop": stop, "on_report": record})
        worker.start()
        try:
            deadline = time.monotonic() + 10
            while not seen and time.monotonic() < deadline:
                time.sleep(0.05)
            (docs / "a.md").write_text("# A\n\nChanged words about storms at sea.\n")
            while len(seen) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop.set()
            worker.join(timeout=10)
    assert seen[0] == ("scheduled check", 1)
    assert seen[1] == ("file change", 1)


def test_the_schedule_alternates_checks_and_full_revalidations() -> None:
    now = [0.0]
    calls: list[bool] = []
    stop = threading.Event()

    def run(verify: bool) -> bool:
        calls.append(verify)
        now[0] += 10.0
        if len(calls) == 7:
            stop.set()
        return verify

    watch(run, [], interval=10.0, full_every=30.0, stop=stop, clock=lambda: now[0])
    assert calls == [False, False, False, True, False, False, True]


def test_the_store_writing_itself_inside_a_watched_folder_does_not_wake_the_watch(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.md").write_text("# A\n\nWords about harbours.\n")
    init_config(tmp_path, ["."])  # the store lives inside the watched folder
    seen: list[str] = []
    stop = threading.Event()
    with KnowledgeBase.open(tmp_path) as engine:
        worker = threading.Thread(target=engine.watch, kwargs={
            "interval": 3600, "full_every": 7200, "stop": stop,
            "on_report": lambda report, reason: seen.append(reason)})
        worker.start()
        time.sleep(4)
        stop.set()
        worker.join(timeout=10)
    assert seen == ["scheduled check"]
