"""Shared fixtures: the bundled sample corpus and hypothesis profiles."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "corpus"

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=600)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def corpus_text(pattern: str = "*") -> str:
    """The files of the sample corpus matching ``pattern``, joined by blank lines."""
    return "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob(pattern)))


@pytest.fixture(scope="session")
def prose() -> str:
    return corpus_text("*.txt")


@pytest.fixture(scope="session")
def corpus() -> str:
    return corpus_text()
