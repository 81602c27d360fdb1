"""The crash-point replay, run in a lean process.

``python -m tests.reliability.crash_runner DIR [SCENARIO] [EVERY]`` replays the
scenario named ``SCENARIO`` (a key of :data:`~tests.reliability.harness.SCENARIOS`,
default ``store``) at every ``EVERY``-th crash point (default 1: all of them).
It forks once per crash point; a fork is cheap from a process that imported only
kbsync, while a test process that has loaded a neural model would copy gigabytes
of page tables per fork and may hold threads. Prints the result as JSON.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.reliability.harness import (
    SCENARIOS,
    Scenario,
    clone,
    crash_in_child,
    killed,
    record_scenario,
    recover,
)

# Pure-Python modules that a vector store's client loads (about a second for
# LanceDB's); loaded once here, not in every child. They start no thread, which
# :func:`preload` checks: the forking process must stay free of them.
PRELOAD = {"lancedb": ("lance_namespace",)}


def _threads() -> int:
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 0


def preload(modules: tuple[str, ...]) -> None:
    """Import ``modules`` into the forking process, making sure that they start no thread."""
    before = _threads()
    for name in modules:
        importlib.import_module(name)
    if _threads() != before:
        raise RuntimeError(f"importing {', '.join(modules)} started a thread: fork is unsafe")


def _sampled(points: list[str], every: int) -> list[int]:
    """The points (from 1) to kill at: every ``every``-th, and each at a vector-store call
    or just after one, where the store and the vector store disagree."""
    near_sink = {n for n, name in enumerate(points, 1) if name.startswith("sink.")}
    near_sink |= {n + 1 for n in near_sink if n < len(points)}
    return sorted(set(range(1, len(points) + 1, every)) | near_sink)


def replay(folder: Path, scenario: Scenario | None = None, every: int = 1) -> dict[str, Any]:
    """Kill the scenario at each of its crash points in turn and check the recovery.

    With ``every`` above 1, only a sample of the points (see :func:`_sampled`).
    """
    started = time.perf_counter()
    steps = record_scenario(folder, scenario)
    survived = tried = 0
    failures: list[str] = []
    for step in steps:
        for n in _sampled(step.points, every):
            name = step.points[n - 1]
            tried += 1
            work = folder / "crash"
            clone(step.before, work)
            status = crash_in_child(lambda w=work, op=step.operation: op(w), crash_at=n)
            if not killed(status):
                failures.append(f"{step.name}, point {n} ({name}): not reached ({status})")
            elif problems := recover(work, step):
                failures.append(f"{step.name}, point {n} ({name}): {'; '.join(problems)}")
            else:
                survived += 1
            shutil.rmtree(work)
    names = Counter(name for step in steps for name in step.points)
    return {
        "crash_points": sum(len(step.points) for step in steps), "tried": tried,
        "survived": survived,
        "per_step": {step.name: len(step.points) for step in steps},
        "per_name": dict(sorted(names.items())),
        "seconds": round(time.perf_counter() - started, 1), "failures": failures,
    }


if __name__ == "__main__":
    name = sys.argv[2] if len(sys.argv) > 2 else "store"
    preload(PRELOAD.get(name, ()))
    every = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    print(json.dumps(replay(Path(sys.argv[1]), SCENARIOS[name], every)))
