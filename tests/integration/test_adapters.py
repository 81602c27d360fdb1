"""The LangChain and LlamaIndex adapters, with the real libraries, over a synced corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document as LIDocument
from llama_index.core.schema import NodeRelationship

from kbsync import KnowledgeBase, chunk_text
from kbsync.adapters import langchain as lc
from kbsync.adapters import llamaindex as li
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
    assert [r.score for r in results] == [h.score for h in hits]
    assert [r.node.get_content() for r in results] == [h.text for h in hits]
    assert results[0].node.node_id == f"{hits[0].source}:{hits[0].key}#{hits[0].index}"
    assert results[0].node.metadata["chunk_identity"] == hits[0].digest
