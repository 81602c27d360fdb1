"""A query that shares nothing with the knowledge base finds nothing, in every mode.

The hashing embedder's vectors are hashed words: random letters land in buckets that
other words filled, and read a cosine of about 0.14 against the nearest chunks of the
sample corpus, which vector and hybrid search showed as hits while full text found none.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from kbsync.embed.hashing import HashingEmbedder
from tests.conftest import CORPUS

MODES = ("text", "vector", "hybrid")


@pytest.fixture(scope="module")
def hashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("hashed")
    shutil.copytree(CORPUS, home / "docs")
    with KnowledgeBase.create(home, ["docs"], embedder={"kind": "hashing"}) as kb:
        assert not kb.sync().failed
    return home


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("context", [0, 300])
def test_random_letters_find_nothing_in_any_mode(hashed: Path, mode: str, context: int) -> None:
    with KnowledgeBase.open(hashed) as kb:
        for query in ("qzxv wplkmr trbnq", "vmqjx", "zzkq plw ghtrx ywvb"):
            assert kb.search(query, k=5, mode=mode, context_tokens=context) == [], query


@pytest.mark.parametrize("mode", MODES)
def test_one_real_word_among_random_letters_still_finds_its_chunks(hashed: Path,
                                                                   mode: str) -> None:
    embedder = HashingEmbedder()
    with KnowledgeBase.open(hashed) as kb:
        hits = kb.search("qzxv wplkmr retries", k=5, mode=mode, context_tokens=0)
    assert len(hits) == 5
    assert all(embedder.share_terms("retries", [h.text for h in hits]))
    assert all(0 < h.relevance <= 1 for h in hits)


def test_every_vector_hit_of_the_hashing_embedder_shares_a_term_with_the_query(
        hashed: Path) -> None:
    embedder = HashingEmbedder()
    with KnowledgeBase.open(hashed) as kb:
        for query in ("lantern oil wick", "bake bread overnight", "harbour master"):
            hits = kb.search(query, k=8, mode="vector", context_tokens=0)
            assert hits, query
            assert all(embedder.share_terms(query, [h.text for h in hits])), query


def test_share_terms_reads_words_and_their_stems_not_stopwords() -> None:
    embedder = HashingEmbedder()
    assert embedder.share_terms("retries qzxv", ["Retrying a request.", "Bread rises.",
                                                 "qzx"]) == [True, False, False]
    assert embedder.share_terms("the of", ["the of and"]) == [False]
    assert embedder.share_terms("anything", []) == []
