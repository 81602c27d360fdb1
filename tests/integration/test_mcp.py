"""`kbsync mcp` end to end: the SDK's own client spawns the server over stdio."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from kbsync import KnowledgeBase
from kbsync.mcp.server import build_server, document_uri

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _talk(folder: Path, body: Callable[[Client], Awaitable[None]], *extra: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [SRC, *filter(None, [os.environ.get("PYTHONPATH")])])}
    params = StdioServerParameters(command=sys.executable, env=env,
                                   args=["-m", "kbsync", "mcp", "-c", str(folder), *extra])

    async def main() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            await body(client)

    anyio.run(main)


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def test_a_real_client_searches_reads_and_diffs_but_may_not_sync(synced_corpus: Path) -> None:
    with KnowledgeBase.open(synced_corpus) as kb:
        expected = kb.search("retry backoff jitter", k=3)
        status = kb.status()
        text = kb.document("a-harbormaster-cli.md").text
        documents = kb.documents()

    async def body(client: Client) -> None:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"search", "status", "diff", "sync"}

        found = _data(await client.call_tool("search", {"query": "retry backoff jitter", "k": 3}))
        passages = found["passages"]
        assert [(p["key"], p["heading"]) for p in passages] == [
            (h.key, h.heading) for h in expected]
        assert [p["text"] for p in passages] == [h.context for h in expected]
        assert passages[0]["score"] >= passages[-1]["score"]
        assert [p["rank"] for p in passages] == [1, 2, 3]
        assert all(0 <= p["relevance"] <= 1 for p in passages)
        where = {"path": ["a-harbormaster-cli.md", "nope.md"], "source": "*"}
        filtered = _data(await client.call_tool(
            "search", {"query": "retry backoff jitter", "k": 3, "where": where}))
        assert filtered["passages"]
        assert {p["key"] for p in filtered["passages"]} == {"a-harbormaster-cli.md"}
        malformed = await client.call_tool("search", {"query": "x", "where": {"a b": "c"}})
        assert malformed.is_error
        others = _data(await client.call_tool("search", {
            "query": "retry backoff jitter", "k": 5,
            "where": {"path": {"$ne": "a-harbormaster-cli.md"}, "version": {"<": 9}}}))
        assert others["passages"] == []  # no document has a version number
        others = _data(await client.call_tool("search", {
            "query": "retry backoff jitter", "k": 5,
            "where": {"path": {"!=": "a-harbormaster-cli.md"}}}))
        assert others["passages"]
        assert "a-harbormaster-cli.md" not in {p["key"] for p in others["passages"]}
        bad_bound = await client.call_tool("search", {"query": "x",
                                                      "where": {"date": {">": "soon"}}})
        assert bad_bound.is_error
        text_only = _data(await client.call_tool("search", {"query": "harbor", "mode": "text"}))
        assert text_only["passages"]
        bad = await client.call_tool("search", {"query": "x", "mode": "fuzzy"})
        assert bad.is_error

        counts = _data(await client.call_tool("status", {}))
        assert counts["documents"] == status.documents == 28
        assert counts["chunks"] == status.chunks

        change = _data(await client.call_tool("diff", {"key": "a-harbormaster-cli.md"}))
        assert change["key"] == "a-harbormaster-cli.md"
        assert {"verdict", "kind", "reason", "similarity", "regions"} <= set(change)
        missing = await client.call_tool("diff", {"key": "nope.md"})
        assert missing.is_error
        assert "no such document" in missing.content[0].text

        refused = await client.call_tool("sync", {})
        assert refused.is_error
        assert "--allow-sync" in refused.content[0].text

        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["kbsync://document/{+key}"]
        listed = await client.list_resources()
        assert [r.name for r in listed.resources] == [d.key for d in documents]
        assert listed.next_cursor is None  # 28 documents fit in one page
        read = await client.read_resource("kbsync://document/a-harbormaster-cli.md")
        assert read.contents[0].text == text
        with pytest.raises(MCPError, match="no such document"):
            await client.read_resource("kbsync://document/nope.md")

    _talk(synced_corpus, body)


def test_documents_are_listed_page_by_page_and_each_listed_uri_reads_back(
    synced_corpus: Path, tmp_path: Path,
) -> None:
    home = tmp_path / "kb"
    shutil.copytree(synced_corpus, home)
    odd = home / "corpus" / "notes" / "tide tables?#100%.md"
    odd.parent.mkdir()
    odd.write_text("# Tides\n\nHigh water at the harbour mouth comes an hour late.\n")

    async def body(client: Client) -> None:
        pages: list[list[str]] = []
        cursor = None
        while True:
            listed = await client.list_resources(cursor=cursor)
            assert len(listed.resources) <= 5
            pages.append([r.uri for r in listed.resources])
            cursor = listed.next_cursor
            if cursor is None:
                break
        uris = [uri for page in pages for uri in page]
        assert uris == [document_uri(d.key) for d in documents]
        assert len(pages) == 6  # 29 documents, 5 a page
        for key in (documents[0].key, "notes/tide tables?#100%.md"):
            assert document_uri(key) in uris
            read = await client.read_resource(document_uri(key))
            assert read.contents[0].text == kb.document(key).text
        with pytest.raises(MCPError, match="invalid cursor"):
            await client.list_resources(cursor="not a cursor")

    with KnowledgeBase.open(home) as kb:
        assert kb.sync().total("new") == 1
        documents = kb.documents()

        async def main() -> None:
            async with Client(build_server(kb, page_size=5), raise_exceptions=True) as client:
                await body(client)

        anyio.run(main)


def test_with_allow_sync_a_client_brings_the_knowledge_base_up_to_date(
    synced_corpus: Path, tmp_path: Path,
) -> None:
    home = tmp_path / "kb"
    shutil.copytree(synced_corpus, home)
    page = home / "corpus" / "b-oncall-runbook.md"
    page.write_text(page.read_text() + "\n\nPage the harbour master after midnight.\n")

    async def body(client: Client) -> None:
        synced = _data(await client.call_tool("sync", {}))
        assert synced["documents"]["modified"] == 1
        assert synced["failed"] is False
        change = _data(await client.call_tool("diff", {"key": "b-oncall-runbook.md"}))
        assert change["verdict"] in ("reprocess", "cosmetic")
        assert any("harbour master after midnight" in r["text"] for r in change["regions"])

    _talk(home, body, "--allow-sync")
