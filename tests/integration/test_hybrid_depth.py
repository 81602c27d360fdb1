"""Hybrid search ranks its first hits alike however many hits are asked for."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from kbsync.engine import init_config

WORDS = ("retry delay backoff timeout queue worker task schedule cron limit token cache "
         "index vector chunk search filter header cookie session cors middleware").split()
QUERIES = ("retry backoff delay", "cors middleware header", "cache token limit",
           "queue worker task", "vector index search", "cookie session", "cron schedule",
           "filter chunk", "timeout retry", "middleware session cookie")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("depth")
    docs = root / "docs"
    docs.mkdir()
    pick = random.Random(7)
    for n in range(120):
        heading = " ".join(pick.sample(WORDS, 2))
        body = " ".join(pick.choice(WORDS) for _ in range(pick.randint(20, 60)))
        (docs / f"page-{n:03d}.md").write_text(f"# {heading}\n\n{body}.\n")
    init_config(root, ["docs"], embedder={"kind": "hashing"})
    with KnowledgeBase.open(root) as engine:
        assert not engine.sync().failed
    return root


def test_the_first_hybrid_hits_are_the_same_for_a_few_or_many_asked(kb: Path) -> None:
    with KnowledgeBase.open(kb) as engine:
        for query in QUERIES:
            few = engine.search(query, k=3, mode="hybrid", context_tokens=0)
            many = engine.search(query, k=60, mode="hybrid", context_tokens=0)
            assert [(h.key, h.index) for h in few] == [(h.key, h.index) for h in many[:3]], \
                query

