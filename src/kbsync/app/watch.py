"""Keep a knowledge base in sync over time: scheduled checks, file events, full revalidation.

Folders are watched for file events (watchdog, extra ``watch``), which trigger a
sync after a short quiet period; every ``interval`` a sync runs anyway (the
reconciliation that catches a missed event, and the conditional check of web
pages), and every ``full_every`` it runs with ``verify`` (every file read, every
page fetched without validators) as the safety net against lying metadata.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from kbsync.errors import DependencyMissingError

__all__ = ["watch"]

Report = TypeVar("Report")


def watch(
    run_sync: Callable[[bool], Report],
    folders: Sequence[Path],
    *,
    interval: float = 86_400.0,
    full_every: float = 30 * 86_400.0,
    quiet: float = 1.0,
    stop: threading.Event | None = None,
    on_report: Callable[[Report, str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    ignore: Sequence[Path] = (),
) -> None:
    """Run ``run_sync(verify)`` on events and on schedule until ``stop`` is set.

    Events under ``ignore`` (the store's own folder) and under hidden folders or
    files are not changes of a source: the sync writing its store must not wake it.
    """
    stop = stop or threading.Event()
    changed = threading.Event()
    observer = _observer(folders, changed, ignore) if folders else None
    now = clock()
    next_check, next_full = now, now + full_every
    try:
        while not stop.is_set():
            now = clock()
            reason = ""
            if now >= next_full:
                reason = "full revalidation"
                next_full, next_check = now + full_every, now + interval
            elif now >= next_check:
                reason, next_check = "scheduled check", now + interval
            elif changed.is_set():
                # Let a burst of events settle before syncing once.
                changed.clear()
                if stop.wait(quiet):
                    break
                if changed.is_set():
                    continue
                reason = "file change"
            if reason:
                report = run_sync(reason == "full revalidation")
                if on_report is not None:
                    on_report(report, reason)
                continue
            stop.wait(min(0.2, max(0.0, min(next_check, next_full) - now)))
    finally:
        if observer is not None:
            observer.stop()
            observer.join()


def _observer(folders: Sequence[Path], changed: threading.Event,
              ignore: Sequence[Path]) -> Any:
    watchdog = _watchdog()
    events, observers = watchdog
    handler_type: type = events.FileSystemEventHandler
    skipped = [str(p.resolve()) for p in ignore]

    def relevant(path: str) -> bool:
        resolved = str(Path(path).resolve())
        if any(resolved == s or resolved.startswith(s + "/") for s in skipped):
            return False
        return not any(part.startswith(".") for part in Path(path).parts[1:])

    class Handler(handler_type):  # type: ignore[misc]
        def on_any_event(self, event: object) -> None:
            if getattr(event, "event_type", "") in ("opened", "closed_no_write"):
                return
            paths = [getattr(event, "src_path", ""), getattr(event, "dest_path", "")]
            if any(p and relevant(str(p)) for p in paths):
                changed.set()

    observer = observers.Observer()
    for folder in folders:
        if folder.is_dir():
            observer.schedule(Handler(), str(folder), recursive=True)
    observer.start()
    return observer


def _watchdog() -> tuple[ModuleType, ModuleType]:
    try:
        import watchdog.events as events
        import watchdog.observers as observers
    except ImportError as exc:
        raise DependencyMissingError("watching folders", "watch", "watchdog", exc) from exc
    return events, observers
