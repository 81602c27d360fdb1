"""With an external vector store (LanceDB), a kill at any write step still converges.

The scenario is the crash-point replay's (see ``test_crash_points.py``), smaller:
index 8 documents; edit 3, delete 1, add 1, rename 1; erase 1, with a
``[vectors]`` table naming LanceDB. After the rerun of the killed step,
`verify` (which reconciles the vector store: nothing missing, stray or stale,
an empty outbox) passes, the logical dump of the store and the vector store's
points (ids and payloads) equal the uncrashed run's, and one more sync writes
nothing to the store but its run report and makes no call to the vector store.

Each point costs two processes that load LanceDB (about a second), so CI kills
at every ``KBSYNC_SINK_CRASH_EVERY``-th point (default 16) and at each point at
or just after a vector-store call; ``KBSYNC_SINK_CRASH_EVERY=1`` tries them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.harness import save_result

EVERY = int(os.environ.get("KBSYNC_SINK_CRASH_EVERY", "16"))


def test_a_kill_at_every_crash_point_converges_with_a_vector_store_configured(
    scratch: Path,
) -> None:
    pytest.importorskip("lancedb")
    run = subprocess.run(
        [sys.executable, "-m", "tests.reliability.crash_runner", str(scratch), "lancedb",
         str(EVERY)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True, text=True, check=False, timeout=3600,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    failures = result.pop("failures")
    save_result("crash_points_sink" if EVERY == 1 else "crash_points_sink_sample", result)
    print(f"\ncrash points with a vector store survived: {result['survived']} of "
          f"{result['tried']} tried, {result['crash_points']} in all "
          f"({result['seconds']:.0f} s)")
    assert not failures, "\n".join(failures[:20])
    assert result["survived"] == result["tried"] > 0
    assert {"sink.reset", "sink.upsert", "sink.delete"} <= result["per_name"].keys()
