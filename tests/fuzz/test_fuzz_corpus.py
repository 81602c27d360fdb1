"""Replay the saved fuzz corpus through the fuzz targets: what the fuzzer found stays fixed.

Each file under ``tests/fuzz/corpus/<target>/`` is one input (hand-written
seeds, and inputs the fuzzer kept for new coverage or that once failed). This
runs without atheris; ``scripts/fuzz.py`` runs the same targets under it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = sorted(
    (target, path.name)
    for target in TARGETS
    for path in (CORPUS / target).iterdir()
    if path.is_file()
)


def test_every_target_has_a_saved_corpus() -> None:
    assert sorted({target for target, _ in CASES}) == sorted(TARGETS)


@pytest.mark.parametrize(("target", "name"), CASES, ids=[f"{t}/{n}" for t, n in CASES])
def test_a_saved_input_keeps_every_invariant_of_its_target(target: str, name: str) -> None:
    TARGETS[target]((CORPUS / target / name).read_bytes())
