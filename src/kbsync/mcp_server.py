"""The Model Context Protocol server: a knowledge base as tools and resources for agents.

``kbsync mcp -c <folder>`` serves over stdio with the official ``mcp`` SDK (extra
``mcp``). Tools: ``search`` (passages with key, heading, score and text),
``status``, ``diff`` (verdict, similarity, changed regions of a document's last
change) and ``sync``, which refuses unless the server was started with
``--allow-sync``: an agent may read a knowledge base by default, not rewrite it.
Every document is a resource, ``kbsync://document/<key>``, holding its current text.
"""

from __future__ import annotations

import threading
from typing import Any

from kbsync import __version__
from kbsync.errors import DependencyMissingError, KbsyncError
from kbsync.knowledge_base import SEARCH_MODES, KnowledgeBase, SearchMode

try:
    # pydantic needs this TypedDict (not typing's) to derive output schemas on Python 3.11.
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
    from mcp.server.mcpserver.resources import ResourceSecurity
    from typing_extensions import TypedDict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise DependencyMissingError("the MCP server", "mcp", exc.name or "mcp") from exc

__all__ = ["DOCUMENT_URI", "Passage", "build_server", "serve"]

DOCUMENT_URI = "kbsync://document/{+key}"
"""The resource of a document; ``{+key}`` keeps the slashes of paths and URLs."""


class Passage(TypedDict):
    """One search result as the ``search`` tool returns it."""

    source: str
    key: str
    title: str | None
    heading: str | None
    score: float
    text: str
    """The hit's context window (its chunk with its section neighbours)."""
    chunk_identity: str
    start: int
    end: int


class SearchResult(TypedDict):
    passages: list[Passage]


def build_server(kb: KnowledgeBase, *, allow_sync: bool = False) -> MCPServer:
    """An MCP server over ``kb``; ``sync`` runs only with ``allow_sync``."""
    server = MCPServer(
        "kbsync", version=__version__, log_level="WARNING",
        instructions="Search a knowledge base kept in sync with its sources; read documents "
                     "as kbsync://document/<key> resources; diff shows a document's last change.")
    # Tools run in worker threads; the knowledge base is one store connection.
    lock = threading.Lock()

    @server.tool(description="Search the knowledge base; passages come best first. mode: "
                             "hybrid (default), vector or text.")
    def search(query: str, k: int = 5, mode: str = "hybrid") -> SearchResult:
        if mode not in SEARCH_MODES:
            raise ToolError(f"unknown mode {mode!r}: use one of {', '.join(SEARCH_MODES)}")
        search_mode: SearchMode = mode  # type: ignore[assignment]  # checked just above
        with lock, _errors():
            hits = kb.search(query, k=k, mode=search_mode)
        return {"passages": [Passage(source=h.source, key=h.key, title=h.title,
                                     heading=h.heading, score=h.score, text=h.context or h.text,
                                     chunk_identity=h.digest, start=h.start, end=h.end)
                             for h in hits]}

    @server.tool(description="Counts of documents, chunks and embeddings, and the last sync.")
    def status() -> dict[str, Any]:
        with lock, _errors():
            return kb.status().to_dict()

    @server.tool(description="The last change of a document (by key): verdict, similarity "
                             "and the changed regions of its current text.")
    def diff(key: str) -> dict[str, Any]:
        with lock, _errors():
            return kb.diff(key).to_dict()

    @server.tool(description="Bring the knowledge base in step with its sources. Refused "
                             "unless the server was started with --allow-sync.")
    def sync() -> dict[str, Any]:
        if not allow_sync:
            raise ToolError("sync is disabled: start the server with `kbsync mcp --allow-sync`")
        with lock, _errors():
            result = kb.sync()
        return {"finished": result.finished, "documents": dict(result.documents),
                "failed": result.failed,
                "failures": [{"source": s.source, "key": key, "message": message}
                             for s in result.sources for key, message in s.failures]}

    @server.resource(DOCUMENT_URI, name="document", mime_type="text/plain",
                     description="The current text of a document, by key.",
                     # The key is looked up in the store, never opened as a path.
                     security=ResourceSecurity(exempt_params={"key"}))
    def document(key: str) -> str:
        with lock:
            try:
                return kb.document(key).text
            except KbsyncError as exc:
                raise ResourceNotFoundError(str(exc)) from exc

    return server


class _errors:  # noqa: N801 - used as a statement, like contextlib's helpers
    """Turn a KbsyncError into a tool error the client reads (not a crash)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if isinstance(exc, KbsyncError):
            raise ToolError(str(exc)) from exc


def serve(kb: KnowledgeBase, *, allow_sync: bool = False) -> None:
    """Serve ``kb`` over stdio until the client closes the connection."""
    build_server(kb, allow_sync=allow_sync).run("stdio")
