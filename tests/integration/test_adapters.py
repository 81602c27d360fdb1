"""The LangChain and LlamaIndex adapters, with the real libraries, over a synced corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document as LIDocument
from llama_index.core.schema import NodeRelationship

from kbsync import KnowledgeBase, chunk_text
from kbsync.adapters import langchain as lc
from kbsync.adapters import llamaindex as li
from kbsync.errors import ParameterError
from tests.conftest import CORPUS

PARAMS = {"min_tokens": 48, "max_tokens": 192}
QUERY = "how do retries and exponential backoff work"


@pytest.fixture(scope="module")
def page() -> str:
    return (CORPUS / "a-harbormaster-retries-backoff.md").read_text(encoding="utf-8")


def test_the_langchain_splitter_cuts_where_kbsync_cuts(page: str) -> None:
    expected = chunk_text(page, **PARAMS).chunks
    splitter = lc.KbsyncTextSplitter(**PARAMS)
    assert splitter.split_text(page) == [c.text for c in expected]
    docs = splitter.split_documents([LCDocument(page_content=page, metadata={"path": "p.md"})])
    assert [(d.metadata["start"], d.metadata["end"]) for d in docs] == [
        (c.start, c.end) for c in expected]
    assert [d.metadata["chunk_identity"] for d in docs] == [c.identity for c in expected]
    assert all(d.metadata["path"] == "p.md" for d in docs)
    assert docs[1].metadata["start_index"] == expected[1].start


def test_an_edit_moves_only_nearby_langchain_boundaries(page: str) -> None:
    splitter = lc.KbsyncTextSplitter(**PARAMS)
    at = page.index("\n\n", len(page) // 2)
    edited = page[:at] + "\n\nAn inserted sentence about harbour cranes." + page[at:]
    before = {d.metadata["chunk_identity"] for d in splitter.create_documents([page])}
    after = {d.metadata["chunk_identity"] for d in splitter.create_documents([edited])}
    assert len(before - after) <= 3
    assert len(before & after) >= len(before) - 3


def test_the_llamaindex_parser_cuts_where_kbsync_cuts(page: str) -> None:
    expected = chunk_text(page, **PARAMS).chunks
    parser = li.KbsyncNodeParser(params=PARAMS)
    nodes = parser.get_nodes_from_documents([LIDocument(text=page, metadata={"path": "p.md"})])
    assert [n.get_content() for n in nodes] == [c.text for c in expected]
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == [
        (c.start, c.end) for c in expected]
    assert [n.metadata["chunk_identity"] for n in nodes] == [c.identity for c in expected]
    assert nodes[0].metadata["path"] == "p.md"
    assert NodeRelationship.NEXT in nodes[0].relationships
    # kbsync's bookkeeping stays out of what LlamaIndex embeds.
    assert "chunk_identity" not in nodes[0].get_content(metadata_mode="embed")  # type: ignore[arg-type]


def test_both_splitters_follow_the_knowledge_base_they_are_built_from(
    synced_corpus: Path, page: str,
) -> None:
    with KnowledgeBase.open(synced_corpus) as kb:
        stored = kb.config.chunker.chunks(page)
        splitter = lc.KbsyncTextSplitter.from_knowledge_base(kb)
        parser = li.KbsyncNodeParser.from_knowledge_base(kb)
    assert splitter.split_text(page) == [c.text for c in stored]
    nodes = parser.get_nodes_from_documents([LIDocument(text=page)])
    assert [n.metadata["chunk_identity"] for n in nodes] == [c.identity for c in stored]


def test_the_langchain_retriever_returns_the_knowledge_base_hits_in_order(
    synced_corpus: Path,
) -> None:
    with KnowledgeBase.open(synced_corpus) as kb:
        hits = kb.search(QUERY, k=4, context_tokens=300)
        docs = lc.KbsyncRetriever(knowledge_base=kb, k=4, context_tokens=300).invoke(QUERY)
    assert [(d.metadata["key"], d.metadata["chunk_index"]) for d in docs] == [
        (h.key, h.index) for h in hits]
    assert "a-harbormaster-retries-backoff.md" in [d.metadata["key"] for d in docs]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    for doc, hit in zip(docs, hits, strict=True):
        assert doc.page_content == hit.context
        assert doc.metadata["heading"] == hit.heading
        assert doc.metadata["chunk_identity"] == hit.digest
        assert (doc.metadata["start"], doc.metadata["end"]) == (hit.start, hit.end)
        assert doc.metadata["context_first"] <= hit.index <= doc.metadata["context_last"]


def test_the_llamaindex_retriever_returns_nodes_with_scores_in_order(synced_corpus: Path) -> None:
    with KnowledgeBase.open(synced_corpus) as kb:
        hits = kb.search(QUERY, k=3, mode="text", context_tokens=0)
        results = li.KbsyncRetriever(kb, k=3, mode="text", context_tokens=0).retrieve(QUERY)
    assert [r.node.metadata["key"] for r in results] == [h.key for h in hits]
    assert [r.score for r in results] == [h.relevance for h in hits]
    assert results[0].score == 1.0  # the best text hit is the measure of the others
    assert [r.node.get_content() for r in results] == [h.text for h in hits]
    assert results[0].node.node_id == f"{hits[0].source}:{hits[0].key}#{hits[0].index}"
    assert results[0].node.metadata["chunk_identity"] == hits[0].digest


@pytest.fixture(scope="module")
def typed_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six pages about retries whose front matter has a date, a number and a list of tags."""
    home = tmp_path_factory.mktemp("typed")
    for n in range(6):
        page = home / "docs" / f"page-{n}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"---\ndate: 2024-0{n + 1}-10\nversion: {n}\n"
                        f"tags: [{'intro' if n % 2 else 'api'}, retries]\nlang: en\n---\n"
                        f"# Page {n}\n\nRetry the request with exponential backoff, page {n}.\n")
    with KnowledgeBase.create(home, sources=["docs"], embedder={"kind": "hashing"}) as kb:
        assert not kb.sync().failed
    return home


def test_the_langchain_retriever_filters_and_carries_relevance_and_document_metadata(
        typed_kb: Path) -> None:
    with KnowledgeBase.open(typed_kb) as kb:
        retriever = lc.KbsyncRetriever(knowledge_base=kb, k=6, mode="text", search_kwargs={
            "filter": {"tags": "intro", "date": {"$gte": "2024-03-01"}}})
        docs = retriever.invoke("retry backoff")
        assert sorted(d.metadata["key"] for d in docs) == ["page-3.md", "page-5.md"]
        for doc in docs:
            assert 0.0 < doc.metadata["score"] <= 1.0
            assert doc.metadata["score"] == doc.metadata["relevance"]
            assert doc.metadata["raw_score"] > 0
            assert doc.metadata["tags"] == ["intro", "retries"]
            assert doc.metadata["version"] in (3, 5)
            assert doc.metadata["date"].startswith("2024-0")
            assert doc.metadata["changed"]
            assert doc.metadata["rank"] in (1, 2)
        fewer = lc.KbsyncRetriever(knowledge_base=kb, k=6, mode="text").invoke(
            "retry backoff", filter={"version": {"$lt": 2}})
        assert sorted(d.metadata["key"] for d in fewer) == ["page-0.md", "page-1.md"]
        kept = lc.KbsyncRetriever(knowledge_base=kb, k=6, mode="text",
                                  search_kwargs={"score_threshold": 1.0}).invoke("retry backoff")
        assert kept
        assert all(d.metadata["score"] == 1.0 for d in kept)


def test_the_llamaindex_retriever_takes_metadata_filters_and_its_scores_pass_a_cutoff(
        typed_kb: Path) -> None:
    from llama_index.core.postprocessor import SimilarityPostprocessor
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )

    def keys(filters: MetadataFilters) -> list[str]:
        with KnowledgeBase.open(typed_kb) as kb:
            found = li.KbsyncRetriever(kb, k=6, mode="text", filters=filters).retrieve("retry")
        return sorted(r.node.metadata["key"] for r in found)

    assert keys(MetadataFilters(filters=[
        MetadataFilter(key="tags", value="intro", operator=FilterOperator.CONTAINS),
        MetadataFilter(key="version", value=3, operator=FilterOperator.GTE)])) == [
        "page-3.md", "page-5.md"]
    assert keys(MetadataFilters(filters=[
        MetadataFilter(key="date", value="2024-02-10", operator=FilterOperator.LTE),
        MetadataFilter(key="version", value=0, operator=FilterOperator.NE)])) == ["page-1.md"]
    assert keys(MetadataFilters(filters=[
        MetadataFilter(key="version", value=1), MetadataFilter(key="version", value=4)],
        condition=FilterCondition.OR)) == ["page-1.md", "page-4.md"]
    with pytest.raises(ParameterError, match="OR"):
        keys(MetadataFilters(filters=[MetadataFilter(key="version", value=1),
                                      MetadataFilter(key="lang", value="en")],
                             condition=FilterCondition.OR))
    with pytest.raises(ParameterError, match="text_match"):
        keys(MetadataFilters(filters=[MetadataFilter(
            key="lang", value="e", operator=FilterOperator.TEXT_MATCH)]))
    with KnowledgeBase.open(typed_kb) as kb:
        found = li.KbsyncRetriever(kb, k=4, mode="hybrid").retrieve("retry the request")
    assert found
    assert all(0.0 < r.score <= 1.0 for r in found)
    assert found[0].node.metadata["tags"]
    kept = SimilarityPostprocessor(similarity_cutoff=0.5).postprocess_nodes(found)
    assert len(kept) == sum(r.score >= 0.5 for r in found) >= 1


def test_the_langchain_retriever_refuses_a_search_it_would_not_do_when_built(
        typed_kb: Path) -> None:
    with KnowledgeBase.open(typed_kb) as kb:
        def build(**fields: Any) -> lc.KbsyncRetriever:
            return lc.KbsyncRetriever(knowledge_base=kb, **fields)

        with pytest.raises(ParameterError, match="search_type 'mmr' is not supported"):
            build(search_type="mmr")
        with pytest.raises(ParameterError, match="unknown search_type 'nearest'"):
            build(search_type="nearest")
        with pytest.raises(ParameterError, match=r"score_threshold must be a relevance from "
                                                 r"0 to 1, not 1\.5"):
            build(search_kwargs={"score_threshold": 1.5})
        with pytest.raises(ParameterError, match="score_threshold"):
            build(search_kwargs={"score_threshold": -0.1})
        with pytest.raises(ParameterError, match="needs search_kwargs"):
            build(search_type="similarity_score_threshold")
        with pytest.raises(ParameterError, match=r"unknown search argument.*fetch_k"):
            build(search_kwargs={"fetch_k": 20})
        with pytest.raises(ParameterError, match="k must be a whole number"):
            build(k=0)
        with pytest.raises(ValueError, match="mode"):  # pydantic checks the Literal
            build(mode="semantic")
        with pytest.raises(ParameterError, match="context_tokens"):
            build(context_tokens=-1)
        with pytest.raises(ValueError, match="searchtype"):  # a misspelt field
            build(searchtype="similarity")
        with pytest.raises(ParameterError, match=r"k is given twice, 3 and search_kwargs"):
            build(k=3, search_kwargs={"k": 7})
        assert build(k=7, search_kwargs={"k": 7}).search_kwargs == {"k": 7}
        retriever = build(mode="text", search_type="similarity_score_threshold",
                          search_kwargs={"score_threshold": 1.0})
        assert all(d.metadata["score"] == 1.0 for d in retriever.invoke("retry backoff"))
        with pytest.raises(ParameterError, match="score_threshold"):
            retriever.invoke("retry backoff", score_threshold=2)


def test_the_llamaindex_retriever_refuses_arguments_it_would_not_use_when_built(
        typed_kb: Path) -> None:
    with KnowledgeBase.open(typed_kb) as kb:
        with pytest.raises(ParameterError, match="k must be a whole number"):
            li.KbsyncRetriever(kb, k=0)
        with pytest.raises(ParameterError, match="unknown mode 'mmr'"):
            li.KbsyncRetriever(kb, mode="mmr")  # type: ignore[arg-type]
        with pytest.raises(ParameterError, match="context_tokens"):
            li.KbsyncRetriever(kb, context_tokens=-5)
        with pytest.raises(TypeError, match="vector_store_query_mode"):
            li.KbsyncRetriever(kb, vector_store_query_mode="mmr")  # type: ignore[call-arg]
