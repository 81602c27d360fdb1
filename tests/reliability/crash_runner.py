"""The crash-point replay, run in a lean process: ``python -m tests.reliability.crash_runner DIR``.

It forks once per crash point; a fork is cheap from a process that imported only
kbsync, while a test process that has loaded a neural model would copy gigabytes
of page tables per fork and may hold threads. Prints the result as JSON.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.reliability.harness import clone, crash_in_child, killed, record_scenario, recover


def replay(folder: Path) -> dict[str, Any]:
    """Kill the scenario at each of its crash points in turn and check the recovery."""
    started = time.perf_counter()
    steps = record_scenario(folder)
    survived = 0
    failures: list[str] = []
    for step in steps:
        for n, name in enumerate(step.points, 1):
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
        "crash_points": sum(len(step.points) for step in steps), "survived": survived,
        "per_step": {step.name: len(step.points) for step in steps},
        "per_name": dict(sorted(names.items())),
        "seconds": round(time.perf_counter() - started, 1), "failures": failures,
    }


if __name__ == "__main__":
    print(json.dumps(replay(Path(sys.argv[1]))))
