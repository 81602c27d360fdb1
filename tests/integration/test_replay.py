"""The replay of real documentation histories (``benchmarks/replay.py``), sampled.

Each history of ``<repo>/../shared/corpora`` is synced at every ``SAMPLE[name]``-th commit
(the commits in between are written to the folder without a sync), and every check of the
replay must pass. The change-report checks (similarity against the line-diff oracle, no
re-examine verdict where most lines are unchanged) have their own test, so the others can be
run alone with ``-k "not change_reports"``. A missing corpus skips, except under ``CI=true``,
where it fails.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from benchmarks import replay

from tests.conftest import corpora_file

# Commits between two syncs, per history, chosen to keep this file near three minutes on a
# loaded two-core machine: the first sync of Django's 661 files and every read of FastAPI's
# 700 KB release notes (rewritten by 181 of its 200 commits) cost seconds each.
SAMPLE = {"fastapi-docs-2023-history": 10, "django-docs-history": 50,
          "fastapi-docs-history": 100}
PARALLEL = ("fastapi-docs-2023-history", 10, 60)  # syncs at 0, 10, ..., 60 (the renames)
ON_RAY = ("fastapi-docs-2023-history", 20, 60)  # syncs at 0, 20, 40, 60


def _history(name: str) -> Path:
    return corpora_file(replay.history_path(name).name)


@cache
def _replayed(name: str) -> object:
    """The tally of one history's sampled replay (run once for both tests of it).

    Each sampled commit is also synced alone (``pairs``): change reports are checked against
    the line oracle of one commit.
    """
    return replay.replay(replay.Replay(_history(name), every=SAMPLE[name], pairs=True))


def _failed(tally: object, checks: set[str]) -> dict[str, tuple[int, list[str]]]:
    """How many times each of ``checks`` failed, with the first few failures."""
    failures = tally.failures  # type: ignore[attr-defined]
    examples = tally.examples  # type: ignore[attr-defined]
    return {c: (failures[c], examples.get(c, [])) for c in checks if failures[c]}


@pytest.mark.parametrize("name", list(SAMPLE))
def test_every_sampled_sync_of_a_real_history_matches_git(name: str) -> None:
    tally = _replayed(name)
    assert tally.synced > 2  # type: ignore[attr-defined]
    checks = set(tally.failures) - set(replay.CHANGE_CHECKS)  # type: ignore[attr-defined]
    assert _failed(tally, checks) == {}
    assert tally.labels_checked == tally.labels_agreed  # type: ignore[attr-defined]
    assert tally.stat_collisions == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", list(SAMPLE))
def test_change_reports_of_a_real_history_agree_with_the_line_oracle(name: str) -> None:
    tally = _replayed(name)
    assert tally.modified_compared > 0  # type: ignore[attr-defined]
    assert _failed(tally, set(replay.CHANGE_CHECKS)) == {}


def test_the_parallel_sync_on_postgresql_stores_what_one_process_stores(
        postgres_url: str) -> None:
    name, every, limit = PARALLEL
    tally = replay.compare_parallel(replay.Replay(_history(name), every=every, limit=limit),
                                    postgres_url,
                                    workers=2, change_checks=False)
    assert tally.synced > 2
    assert _failed(tally, set(tally.failures)) == {}


def test_the_ray_driver_stores_and_reports_what_one_process_does(ray_local: object) -> None:
    """The whole history is replayed by ``benchmarks/replay.py --engine ray`` (docs/replay.md);
    here a sample of it, on the session's Ray."""
    name, every, limit = ON_RAY
    tally = replay.compare_ray(replay.Replay(_history(name), every=every, limit=limit), None,
                               cpus=2, change_checks=False)
    assert tally.synced > 2
    assert _failed(tally, set(tally.failures)) == {}


# -- the harness's own oracles, on small made-up histories ------------------------------------


def test_the_line_oracle_counts_the_bytes_of_equal_normalized_lines() -> None:
    old = "alpha beta\n\ngamma  delta\nepsilon\n"
    assert replay.oracle_similarity(old, old) == 1.0
    assert replay.oracle_similarity(old, "alpha   beta\ngamma delta\n\nepsilon") == 1.0
    # "epsilon" became "zeta": K = 12 + 12 of 31 and 27 normalized bytes (separators included).
    assert replay.oracle_similarity(old, "alpha beta\ngamma delta\nzeta\n") == pytest.approx(
        48 / 58)
    assert replay.oracle_similarity("one\n", "two\n") == 0.0


def test_expected_labels_follow_git_through_the_normalized_text() -> None:
    before = {"same.md": "# Same\n\nText.\n", "spaced.md": "# Spaced\n\nA  b.\n",
              "edited.md": "# Edited\n\nOld words.\n", "gone.md": "# Gone\n\nBye.\n",
              "renamed.md": "# Renamed\n\nSame text.\n",
              "reworded.md": "# Reworded\n\nFirst words.\n", "notes.bin": "x"}
    after = {"same.md": before["same.md"], "spaced.md": "# Spaced\n\nA b.\n",
             "edited.md": "# Edited\n\nNew words.\n", "fresh.md": "# Fresh\n\nHello.\n",
             "moved/renamed.md": before["renamed.md"],
             "moved/reworded.md": "# Reworded\n\nOther words.\n", "notes.bin": "y"}
    changes = [{"op": "rename", "old_path": "renamed.md", "path": "moved/renamed.md"},
               {"op": "rename", "old_path": "reworded.md", "path": "moved/reworded.md"}]
    assert replay.expected_actions(before, after, changes, replay.Extractions().of) == {
        "edited.md": "modified", "fresh.md": "new", "gone.md": "deleted",
        "moved/renamed.md": "moved", "moved/reworded.md": "new", "reworded.md": "deleted"}
