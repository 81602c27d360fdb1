"""Real edits keep the kind and reason checked by hand (tests/golden/edit_kinds.json)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from benchmarks.change_reports import extracted, modifications
from benchmarks.edit_kinds import commits_of

from kbsync import compare
from tests.conftest import corpora_file

GOLDEN = json.loads((Path(__file__).parent / "edit_kinds.json").read_text(encoding="utf-8"))
BY_HISTORY: dict[str, list[dict[str, str]]] = defaultdict(list)
for _edit in GOLDEN["edits"]:
    BY_HISTORY[_edit["history"]].append(_edit)


@pytest.mark.parametrize("name", sorted(BY_HISTORY))
def test_real_edits_keep_their_kind_and_reason(name: str) -> None:
    path = corpora_file(f"{name}-history.jsonl.gz")
    wanted = {(e["commit"], e["path"]): e for e in BY_HISTORY[name]}
    found = []
    for (key, old, new), commit in zip(modifications(path), commits_of(path), strict=True):
        golden = wanted.get((commit, key))
        if golden is None:
            continue
        report = compare(extracted(key, old), extracted(key, new))
        found.append(key)
        assert (str(report.kind), report.reason, str(report.verdict)) == \
            (golden["kind"], golden["reason"], golden["verdict"]), (commit, key)
    assert len(found) == len(wanted)
