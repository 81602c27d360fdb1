"""A parallel sync (PostgreSQL, a coordinator and a worker) killed at a crash point converges.

The scenario's crash points are counted across its processes and recorded once;
then, for a sample of the points N (every ``KBSYNC_PARALLEL_CRASH_EVERY``-th; 1
for all of them), the step runs again from a copy of the database before it and
whichever process reaches the N-th point is killed (a killed coordinator takes its
worker with it). The next run must converge: `verify` passes, the logical dump
equals the uncrashed run's, and one more sync adds its run report and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kbsync import crashpoints
from tests.reliability.harness import crash_in_child, killed, save_result

EVERY = int(os.environ.get("KBSYNC_PARALLEL_CRASH_EVERY", "25"))


def test_a_parallel_sync_killed_at_its_crash_points_converges_on_the_next_run(
    scratch: Path, postgres_url: str,
) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.reliability.parallel_crash_runner", str(scratch),
         postgres_url, str(EVERY)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True, text=True, check=False, timeout=3600,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    failures = result.pop("failures")
    result["every"] = EVERY
    save_result("crash_points_parallel", result)
    print(f"\nparallel crash points survived: {result['survived']} of {result['tried']} tried "
          f"({result['crash_points']} in all; killed {result['killed']}; "
          f"{result['seconds']:.0f} s)")
    assert not failures, "\n".join(failures[:20])
    # A point that no process reached (an interleaving with fewer of them) is no failure.
    assert result["survived"] + result["killed"].get("not reached", 0) == result["tried"]
    assert result["killed"].get("coordinator", 0) > 0


def test_processes_sharing_a_crash_counter_are_killed_at_their_nth_point_together(
    tmp_path: Path,
) -> None:
    counter, record = tmp_path / "counter", tmp_path / "points.txt"

    def three(name: str) -> None:
        for _ in range(3):
            crashpoints.crashpoint(name)

    def shared(name: str, crash_at: int) -> int:
        return crash_in_child(lambda: (crashpoints.arm(counter=str(counter), record=str(record),
                                                       crash_at=crash_at), three(name)))

    assert shared("first", 5) == 0  # points 1 to 3
    assert killed(shared("second", 5))  # points 4 and 5: killed at its second
    assert int(counter.read_text()) == 5
    assert record.read_text().split() == ["first"] * 3 + ["second"] * 2
