"""A knowledge base over the sample corpus, synced once for the tests that only read it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from tests.conftest import CORPUS


@pytest.fixture(scope="session")
def synced_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a synced knowledge base over a copy of the sample corpus (offline
    hashing embedder). Tests must not change it; copy it to write."""
    home = tmp_path_factory.mktemp("synced")
    shutil.copytree(CORPUS, home / "corpus")
    with KnowledgeBase.create(home, sources=["corpus"], embedder={"kind": "hashing"}) as kb:
        assert not kb.sync().failed
    return home
