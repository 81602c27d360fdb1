"""Edit kinds on real documentation histories, against the word-diff oracle and the labels.

An edit that changes a number, or ten or more words, is never cosmetic; an edit of
whitespace, punctuation or case only is cosmetic or unchanged (at least 95 %); the labelled
sample of ``benchmarks/edit_labels.tsv`` agrees with the kinds.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from benchmarks.change_reports import extracted, modifications
from benchmarks.edit_kinds import commits_of, read_labels
from benchmarks.edit_oracle import oracle_edit

from kbsync import ChangeKind, compare
from tests.conftest import corpora_file

# The fastapi-docs histories are mostly their 300-700 KB release notes, rewritten on
# every commit: benchmarks/edit_kinds.py measures them whole; here they would take minutes.
LARGEST = 64_000
LABELS = Path(__file__).resolve().parents[2] / "benchmarks" / "edit_labels.tsv"


def history(name: str) -> Path:
    return corpora_file(f"{name}-history.jsonl.gz")


def edits(name: str, every: int = 1) -> list[tuple[str, str, str, str]]:
    """(commit, path, old text, new text) of the modifies of a history, extracted."""
    out = []
    for (key, old_file, new_file), commit in islice(
            zip(modifications(history(name)), commits_of(history(name)), strict=True),
            0, None, every):
        if max(len(old_file), len(new_file)) <= LARGEST:
            out.append((commit, key, extracted(key, old_file), extracted(key, new_file)))
    return out


def test_an_edit_of_a_number_or_ten_words_is_never_cosmetic_and_one_of_layout_mostly_is(
) -> None:
    layout = []
    decisive = 0
    for name in ("django-docs", "fastapi-docs-2023"):
        for commit, key, old, new in edits(name):
            seen = oracle_edit(old, new)
            kind = compare(old, new).kind
            if seen.number or seen.words >= 10:
                decisive += 1
                assert kind is ChangeKind.SUBSTANTIVE, (name, commit, key)
            if seen.layout_only:
                layout.append(kind in (ChangeKind.COSMETIC, ChangeKind.UNCHANGED))
    assert decisive >= 300
    assert len(layout) >= 20
    assert sum(layout) / len(layout) >= 0.95


def test_the_labelled_sample_agrees_with_the_kinds() -> None:
    labels = read_labels(LABELS)
    agree = total = 0
    for name in ("django-docs", "fastapi-docs-2023", "fastapi-docs"):
        for commit, key, old, new in edits(name):
            label = labels.get((name, commit, key))
            if label is None:
                continue
            kind = compare(old, new).kind
            total += 1
            agree += (label[0] == "cosmetic") == (kind is not ChangeKind.SUBSTANTIVE)
    assert total >= 150
    assert agree / total >= 0.95
