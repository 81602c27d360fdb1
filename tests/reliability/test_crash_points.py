"""A process killed with SIGKILL at any write step leaves a store that the next run repairs.

The scenario's crash points are recorded once; then, for every point N, a
forked child runs the scenario's step from a copy of the state before it and
kills itself at N. The next run must converge: `verify` passes, the logical dump
equals the uncrashed run's, and one more sync writes nothing but its run report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kbsync.engine import add_source, load_config, remove_source
from tests.reliability.harness import crash_in_child, killed, make_kb, save_result


def test_a_kill_at_every_crash_point_of_the_scenario_converges_on_the_next_run(
    scratch: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.reliability.crash_runner", str(scratch)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True, text=True, check=False, timeout=1200,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    failures = result.pop("failures")
    save_result("crash_points", result)
    print(f"\ncrash points survived: {result['survived']} of {result['crash_points']} "
          f"({result['seconds']:.0f} s)")
    assert not failures, "\n".join(failures[:20])
    assert result["survived"] == result["crash_points"] > 0


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
