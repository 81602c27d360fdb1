"""A real documentation history committed to a git repository: every sync of the git source
reports what ``git diff --name-status -M`` names (benchmarks/git_replay.py, a short window)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from benchmarks.git_replay import HISTORY, replay_git

from tests.conftest import corpora_file

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")


def test_the_reports_of_a_replayed_history_match_git_renames_deletions_and_additions(
        tmp_path: Path) -> None:
    # Commits 51-62 of the 2023 FastAPI history: a deletion with an addition (52), six
    # renames, three of them with edits (each a move), a deletion and new pages (60),
    # then edits.
    steps = replay_git(corpora_file(HISTORY), tmp_path, start=50, stop=62)
    assert [s.mismatches for s in steps if not s.matched] == []
    at = {s.index: s for s in steps}
    assert at[60].renames == 6
    assert at[60].exact_renames == 3
    assert at[60].kbsync == {"deleted": 1, "moved": 6, "new": 5}
    assert at[52].kbsync == {"deleted": 1, "new": 1}
