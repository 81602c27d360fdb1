"""A process killed with SIGKILL at any write step leaves a store that the next run repairs.

The scenario's crash points are recorded once; then, for every point N, a
forked child runs the scenario's step from a copy of the state before it and
kills itself at N. The next run must converge: `verify` passes, the logical dump
equals the uncrashed run's, and one more sync writes nothing but its run report.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

from kbsync import crashpoints
from kbsync.engine import Engine, add_source, load_config, remove_source
from tests.reliability.harness import (
    Scenario,
    clone,
    crash_in_child,
    dump,
    killed,
    make_kb,
    save_result,
)


def _recover(root: Path, operation: object) -> list[str]:
    """Redo the interrupted operation, then check; the problems found."""
    assert callable(operation)
    operation(root)  # a rerun of the sync or of the erase that was killed
    with Engine(load_config(root)) as engine:
        problems = engine.verify()
        before = engine.store.total_changes
        engine.sync(wait=False)  # wait=False: a lock left behind would fail here
        writes = engine.store.total_changes - before
    if writes != 1:  # its run report only
        problems.append(f"one more sync wrote {writes} rows, not just its run report")
    return problems


def test_a_kill_at_every_crash_point_of_the_scenario_converges_on_the_next_run(
    scratch: Path,
) -> None:
    started = time.perf_counter()
    scenario = Scenario()
    ref = scratch / "reference"
    scenario.prepare(ref)
    plans = []
    for i, (_, change, operation) in enumerate(scenario.steps):
        change(ref)
        snapshot = scratch / f"before-step-{i}"
        clone(ref, snapshot)
        record = scratch / f"points-{i}.txt"
        crashpoints.arm(record=str(record))
        try:
            operation(ref)
        finally:
            crashpoints.disarm()
        with Engine(load_config(ref)) as engine:
            engine.sync()
        names = record.read_text(encoding="utf-8").split()
        plans.append((snapshot, operation, names, dump(ref / ".kbsync" / "kbsync.db")))

    total = sum(len(names) for _, _, names, _ in plans)
    survived = 0
    failures: list[str] = []
    for i, (snapshot, operation, names, expected) in enumerate(plans):
        for n, name in enumerate(names, 1):
            work = scratch / "crash"
            clone(snapshot, work)
            status = crash_in_child(lambda w=work, op=operation: op(w), crash_at=n)
            if not killed(status):
                failures.append(f"step {i} point {n} ({name}): not reached (status {status})")
            else:
                problems = _recover(work, operation)
                if dump(work / ".kbsync" / "kbsync.db") != expected:
                    problems.append("the logical dump differs from the uncrashed run's")
                if problems:
                    failures.append(f"step {i} point {n} ({name}): {'; '.join(problems)}")
                else:
                    survived += 1
            shutil.rmtree(work)

    seconds = time.perf_counter() - started
    names = Counter(name for _, _, step, _ in plans for name in step)
    save_result("crash_points", {
        "crash_points": total, "survived": survived,
        "per_step": {scenario.steps[i][0]: len(p[2]) for i, p in enumerate(plans)},
        "per_name": dict(sorted(names.items())), "seconds": round(seconds, 1),
    })
    print(f"\ncrash points survived: {survived} of {total} ({seconds:.0f} s)")
    assert not failures, "\n".join(failures[:20])
    assert survived == total > 0


def test_a_configuration_write_killed_at_any_step_leaves_the_old_or_the_new_file(
    tmp_path: Path,
) -> None:
    root = tmp_path / "kb"
    make_kb(root, 1)
    (root / "more").mkdir()
    record = tmp_path / "points.txt"
    status = crash_in_child(lambda: add_source(load_config(root), "more"), record=str(record))
    assert status == 0
    names = record.read_text(encoding="utf-8").split()
    assert names == ["config.write", "config.fsync", "config.rename", "config.fsync_dir"]
    old = (root / "kbsync.toml").read_bytes()
    remove_source(load_config(root), "more")
    assert (root / "kbsync.toml").read_bytes() != old
    for n in range(1, len(names) + 1):
        status = crash_in_child(lambda: add_source(load_config(root), "more"), crash_at=n)
        assert killed(status)
        sources = [s.name for s in load_config(root).sources]
        assert sources in (["docs"], ["docs", "more"]), (names[n - 1], sources)
        if sources == ["docs"]:
            add_source(load_config(root), "more")
        remove_source(load_config(root), "more")
        # Those writes swept any temp file that the killed writer left.
        assert [p.name for p in root.iterdir() if p.name.endswith(".tmp")] == []
