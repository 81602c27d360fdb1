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

from kbsync.engine import add_source, load_config, remove_source
from tests.reliability.harness import (
    clone,
    crash_in_child,
    killed,
    make_kb,
    record_scenario,
    recover,
    save_result,
)


def test_a_kill_at_every_crash_point_of_the_scenario_converges_on_the_next_run(
    scratch: Path,
) -> None:
    started = time.perf_counter()
    steps = record_scenario(scratch)
    total = sum(len(step.points) for step in steps)
    survived = 0
    failures: list[str] = []
    for step in steps:
        for n, name in enumerate(step.points, 1):
            work = scratch / "crash"
            clone(step.before, work)
            status = crash_in_child(lambda w=work, op=step.operation: op(w), crash_at=n)
            if not killed(status):
                failures.append(f"{step.name}, point {n} ({name}): not reached ({status})")
            elif problems := recover(work, step):
                failures.append(f"{step.name}, point {n} ({name}): {'; '.join(problems)}")
            else:
                survived += 1
            shutil.rmtree(work)

    seconds = time.perf_counter() - started
    names = Counter(name for step in steps for name in step.points)
    save_result("crash_points", {
        "crash_points": total, "survived": survived,
        "per_step": {step.name: len(step.points) for step in steps},
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
