"""Change reports on real documentation histories agree with the line-diff oracle (sampled)."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import pytest
from benchmarks.change_reports import extracted, modifications
from benchmarks.oracle import oracle_similarity

from kbsync import Verdict, compare
from tests.conftest import corpora_file

EVERY = 2
# The fastapi-docs history is mostly its 700 KB release notes, rewritten on every
# commit: benchmarks/change_reports.py measures it whole; here it would take minutes.
LARGEST = 64_000


def history(name: str) -> Path:
    return corpora_file(f"{name}-history.jsonl.gz")


@pytest.mark.parametrize("name", ["django-docs", "fastapi-docs-2023"])
def test_similarity_follows_the_line_oracle_and_never_reexamines_a_mostly_kept_document(
    name: str,
) -> None:
    diffs = []
    for key, old_file, new_file in islice(modifications(history(name)), 0, None, EVERY):
        if max(len(old_file), len(new_file)) > LARGEST:
            continue
        old, new = extracted(key, old_file), extracted(key, new_file)
        report = compare(old, new)
        oracle = oracle_similarity(old, new)
        assert not (report.verdict is Verdict.REEXAMINE_EXTRACTION and oracle >= 0.5), key
        diffs.append(abs(report.similarity - oracle))
    assert diffs
    assert sum(d <= 0.1 for d in diffs) / len(diffs) >= 0.95
