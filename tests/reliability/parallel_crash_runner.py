"""The crash-point replay on the parallel driver (PostgreSQL, a coordinator and a worker).

``python -m tests.reliability.parallel_crash_runner DIR URL [EVERY]`` replays
:data:`~tests.reliability.parallel_harness.PARALLEL` on the PostgreSQL server at
``URL`` (its databases are made and dropped here), killed at every ``EVERY``-th
crash point (default 1: all of them). Prints the result as JSON.

The points are counted across processes (``KBSYNC_CRASH_COUNTER``): the coordinator
and the worker it starts inherit the variables, and whichever of them reaches the
N-th point is killed. A killed worker is the coordinator's to make up for within
the run; a killed coordinator takes its whole process group with it (as a kill
of ``kbsync sync`` from a terminal does), its worker included. Either way, the
redone step must converge: `verify` passes, the logical dump equals the uncrashed
run's, and one more sync changes nothing but adds its run report.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbsync import crashpoints
from kbsync.app.knowledge_base import KnowledgeBase
from tests.reliability.harness import killed
from tests.reliability.parallel_harness import (
    PARALLEL,
    WORKERS,
    Databases,
    ParallelScenario,
    clone_kb,
    logical_dump,
    runs,
    use_database,
)


def _spawn_and_wait(original: Any) -> Any:
    """``KnowledgeBase._spawn``, waiting until the started workers are connected: a
    worker takes a share of the run's documents, not only the empty queue at its end
    (a small run is drained sooner than a Python process starts)."""
    def spawn(self: KnowledgeBase, run: str, count: int) -> Callable[[], list[int]]:
        import psycopg

        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        with psycopg.connect(self.config.store.settings.url, autocommit=True) as conn:
            connected = conn.execute(sql).fetchone()
            assert connected is not None
            wait = original(self, run, count)
            deadline = time.monotonic() + 60  # a worker that died is the run's to survive
            while time.monotonic() < deadline:
                now = conn.execute(sql).fetchone()
                assert now is not None
                if now[0] >= connected[0] + count:
                    break
                time.sleep(0.01)
        return wait
    return spawn


def crash_group(work: Callable[[], None], counter: Path, *, crash_at: int = 0,
                record: Path | None = None) -> int:
    """Run ``work`` in a forked child leading a process group of its own, with the crash
    points armed through the environment its worker processes inherit; its wait status.

    When the child ends, whatever is left of its group (a worker whose coordinator
    was killed) is killed too.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        code = 2
        try:
            os.setpgid(0, 0)
            os.environ[crashpoints.ENV_COUNTER] = str(counter)
            os.environ[crashpoints.ENV_CRASH_AT] = str(crash_at)
            if record is not None:
                os.environ[crashpoints.ENV_RECORD] = str(record)
            crashpoints.arm(counter=str(counter), crash_at=crash_at,
                            record=None if record is None else str(record))
            KnowledgeBase._spawn = _spawn_and_wait(KnowledgeBase._spawn)  # type: ignore[method-assign]
            work()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return status


@dataclass(frozen=True)
class Step:
    """One recorded step: the database of the state before it, what it does, what it leaves."""

    number: int
    name: str
    before: Path
    operation: Callable[[Path], None]
    points: list[str]
    expected: dict[str, Any]


def _settle(root: Path) -> None:
    with KnowledgeBase.open(root) as kb:
        kb.sync(allow_mass_delete=True, workers=WORKERS)


def record_scenario(folder: Path, databases: Databases,
                    scenario: ParallelScenario) -> list[Step]:
    """Run the scenario once, uncrashed, recording each step's crash points and result."""
    ref = folder / "reference"
    scenario.prepare(ref)
    use_database(ref, databases.create("ref"))
    steps = []
    for i, (name, change, operation) in enumerate(scenario.steps):
        change(ref)
        before = folder / f"before-step-{i}"
        clone_kb(ref, before, databases, "ref", f"before{i}")
        record = folder / f"points-{i}.txt"
        status = crash_group(lambda op=operation: op(ref), folder / f"counter-{i}",
                             record=record)
        if status != 0:
            raise RuntimeError(f"the uncrashed step {name!r} failed (wait status {status})")
        _settle(ref)
        steps.append(Step(i, name, before, operation, record.read_text(encoding="utf-8").split(),
                          logical_dump(databases.url_of("ref"))))
    return steps


def recover(root: Path, url: str, step: Step) -> list[str]:
    """Redo an interrupted step, then check the store; the problems found."""
    step.operation(root)
    with KnowledgeBase.open(root) as kb:
        problems = [str(p) for p in kb.verify().problems]
    settled, reports = logical_dump(url), runs(url)
    with KnowledgeBase.open(root) as kb:
        before = kb.store.total_changes
        kb.sync(wait=False, workers=WORKERS)  # wait=False: a lock left behind would fail here
        writes = kb.store.total_changes - before
    if writes != 1 or runs(url) != reports + 1:
        problems.append(f"one more sync wrote {writes} rows, not just its run report")
    again = logical_dump(url)
    if again != settled:
        problems.append("one more sync changed " + ", ".join(
            k for k in again if again[k] != settled[k]))
    if again != step.expected:
        problems.append("the logical dump differs from the uncrashed run's in " + ", ".join(
            k for k in again if again[k] != step.expected[k]))
    return problems


def _sampled(total: int, every: int) -> list[int]:
    return list(range(1, total + 1, every))


def replay(folder: Path, url: str, every: int = 1,
           scenario: ParallelScenario = PARALLEL) -> dict[str, Any]:
    """Kill the scenario at each (``every``-th) of its crash points and check the recovery."""
    started = time.perf_counter()
    databases = Databases(url, f"kbcrash_{os.getpid()}")
    try:
        steps = record_scenario(folder, databases, scenario)
        survived = tried = 0
        failures: list[str] = []
        victims: Counter[str] = Counter()
        for step in steps:
            for n in _sampled(len(step.points), every):
                tried += 1
                name = step.points[n - 1]
                work = folder / "crash"
                clone_kb(step.before, work, databases, f"before{step.number}", "crash")
                counter = folder / "counter"
                counter.unlink(missing_ok=True)
                status = crash_group(lambda w=work, op=step.operation: op(w), counter,
                                     crash_at=n)
                reached = int(counter.read_text(encoding="utf-8") or 0) \
                    if counter.exists() else 0
                if killed(status):
                    victims["coordinator"] += 1
                elif status == 0 and reached >= n:
                    victims["worker"] += 1  # the coordinator made up for it
                elif status == 0:
                    victims["not reached"] += 1  # another interleaving, with fewer points
                else:
                    failures.append(f"{step.name}, point {n} ({name}): the step failed "
                                    f"(wait status {status})")
                    shutil.rmtree(work)
                    continue
                if problems := recover(work, databases.url_of("crash"), step):
                    failures.append(f"{step.name}, point {n} ({name}): {'; '.join(problems)}")
                elif reached >= n:
                    survived += 1
                shutil.rmtree(work)
                databases.drop("crash")
    finally:
        databases.close()
    names = Counter(name for step in steps for name in step.points)
    return {
        "crash_points": sum(len(step.points) for step in steps), "tried": tried,
        "survived": survived, "killed": dict(victims),
        "per_step": {step.name: len(step.points) for step in steps},
        "per_name": dict(sorted(names.items())),
        "seconds": round(time.perf_counter() - started, 1), "failures": failures,
    }


if __name__ == "__main__":
    every = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    print(json.dumps(replay(Path(sys.argv[1]), sys.argv[2], every)))
