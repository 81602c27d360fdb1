"""The Model Context Protocol server: a knowledge base as tools and resources for agents.

``kbsync mcp -c <folder>`` serves over stdio with the official ``mcp`` SDK (extra
``mcp``). Tools: ``search`` (passages with key, heading, relevance and text),
``status``, ``diff`` (verdict, kind and reason, similarity, changed regions of a
document's last change) and ``sync``, which refuses unless the server was started with
``--allow-sync``: an agent may read a knowledge base by default, not rewrite it.
Every document is a resource, ``kbsync://document/<key>``, holding its current text;
``resources/list`` names them a page at a time.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from typing import Any, TypeVar, cast
from urllib.parse import quote

from kbsync import __version__
from kbsync.app.knowledge_base import DocumentRef, KnowledgeBase, SearchMode
from kbsync.errors import DependencyMissingError, KbsyncError
from kbsync.terminal import strip_controls

try:
    import anyio.to_thread
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
    from mcp.server.mcpserver.resources import ResourceSecurity
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, ListResourcesResult, PaginatedRequestParams, Resource

    # pydantic needs this TypedDict (not typing's) to derive output schemas on Python 3.11.
    from typing_extensions import TypedDict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise DependencyMissingError("the MCP server", "mcp", exc.name or "mcp", exc) from exc

__all__ = ["DOCUMENT_URI", "PAGE_SIZE", "Passage", "build_server", "document_uri", "serve"]

DOCUMENT_URI = "kbsync://document/{+key}"
"""The resource of a document; ``{+key}`` keeps the slashes of paths and URLs."""
PAGE_SIZE = 100
"""Documents per page of ``resources/list``; a client follows ``nextCursor`` for more."""


class Passage(TypedDict):
    """One search result as the ``search`` tool returns it."""

    source: str
    key: str
    title: str | None
    heading: str | None
    rank: int
    """1 for the best passage."""
    relevance: float
    """From 0 to 1 (vector: cosine; text: BM25 over the best hit's; hybrid: fused over its most)."""
    score: float
    """The ranking's raw value."""
    text: str
    """The hit's context window (its chunk with its section neighbours)."""
    chunk_identity: str
    start: int
    end: int


class SearchResult(TypedDict):
    """What the ``search`` tool returns: the passages, best first."""

    passages: list[Passage]


def build_server(kb: KnowledgeBase, *, allow_sync: bool = False,
                 page_size: int = PAGE_SIZE) -> MCPServer:
    """An MCP server over ``kb``; ``sync`` runs only with ``allow_sync``, and
    ``resources/list`` names ``page_size`` documents per page."""
    # Tools run in worker threads; the knowledge base is one store connection.
    lock = threading.Lock()
    server = _Server(
        kb, lock, page_size, "kbsync", version=__version__, log_level="WARNING",
        instructions="Search a knowledge base kept in sync with its sources; read documents "
                     "as kbsync://document/<key> resources; diff shows a document's last change.")

    @server.tool(description="Search the knowledge base; passages come best first, each with "
                             "its rank and a relevance from 0 to 1. mode: hybrid, vector or "
                             "text (default: the knowledge base's, hybrid with a model). "
                             "where: only documents whose fields match, e.g. "
                             '{"source": "docs", "path": "guide/*", "lang": ["en", "de"], '
                             '"tags": "intro", "date": {">=": "2024-01-01"}, '
                             '"version": {"<": 3}, "status": {"!=": "draft"}}: '
                             "source, path (the document key), title or a metadata key; * and "
                             "? are globs; a metadata list matches when one item does; <, <=, "
                             ">, >= compare numbers and dates, != excludes; all names must "
                             "match, a list is any of its values; an unknown name matches "
                             "nothing.")
    def search(query: str, k: int = 5, mode: SearchMode | None = None,
               where: dict[str, Any] | None = None) -> SearchResult:
        with lock, _errors():
            hits = kb.search(query, k=k, mode=mode, filters=where)
        return {"passages": [Passage(source=_clean(h.source), key=_clean(h.key),
                                     title=_clean(h.title), heading=_clean(h.heading),
                                     rank=h.rank, relevance=h.relevance,
                                     score=h.score, text=_clean(h.context or h.text),
                                     chunk_identity=h.digest, start=h.start, end=h.end)
                             for h in hits]}

    @server.tool(description="Counts of documents, chunks and embeddings, and the last sync.")
    def status() -> dict[str, Any]:
        with lock, _errors():
            return _clean(kb.status().to_dict())

    @server.tool(description="The last change of a document (by key): verdict, kind "
                             "(cosmetic or substantive) and reason (the change that decides "
                             "it, e.g. 'number 950 → 975'), similarity and the changed "
                             "regions of its current text; first_version is true, with no "
                             "verdict, when there is no earlier version.")
    def diff(key: str) -> dict[str, Any]:
        with lock, _errors():
            return _clean(kb.diff(key).to_dict())

    @server.tool(description="Bring the knowledge base in step with its sources. Refused "
                             "unless the server was started with --allow-sync.")
    def sync() -> dict[str, Any]:
        if not allow_sync:
            raise ToolError("sync is disabled: start the server with `kbsync mcp --allow-sync`")
        with lock, _errors():
            result = kb.sync()
        return _clean({"finished": result.finished, "documents": dict(result.documents),
                       "failed": result.failed,
                       "failures": [{"source": s.source, "key": key, "message": message}
                                    for s in result.sources for key, message in s.failures]})

    @server.resource(DOCUMENT_URI, name="document", mime_type="text/plain",
                     description="The current text of a document, by key.",
                     # The key is looked up in the store, never opened as a path.
                     security=ResourceSecurity(exempt_params={"key"}))
    def document(key: str) -> str:
        with lock:
            try:
                return _clean(kb.document(key).text)
            except KbsyncError as exc:
                raise ResourceNotFoundError(_clean(str(exc))) from exc

    return server


def document_uri(key: str) -> str:
    """The resource URI of the document ``key``, which :data:`DOCUMENT_URI` matches back.

    Slashes and the other characters paths and URLs are made of stay as they are;
    ``?``, ``#``, ``%``, spaces and non-ASCII are percent-encoded.
    """
    return DOCUMENT_URI.replace("{+key}", quote(key, safe="/:@!$&'()*+,;="))


class _Server(MCPServer):
    """An MCP server that lists the knowledge base's documents as resources, page by page.

    MCPServer lists only resources registered one by one, and ignores the cursor;
    the documents live in the store, and there may be very many of them.
    """

    def __init__(self, kb: KnowledgeBase, lock: threading.Lock, page_size: int,
                 name: str, **settings: Any) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, not {page_size}")
        super().__init__(name, **settings)
        self._kb, self._lock, self._page_size = kb, lock, page_size

    async def _handle_list_resources(self, ctx: ServerRequestContext[Any],
                                     params: PaginatedRequestParams | None) -> ListResourcesResult:
        after = _after(params.cursor if params is not None else None)
        # One more than a page tells whether another page follows.
        refs = await anyio.to_thread.run_sync(self._page, after)
        page = refs[: self._page_size]
        more = len(refs) > self._page_size
        return ListResourcesResult(
            resources=[Resource(name=_clean(ref.key), uri=document_uri(ref.key),
                                mime_type="text/plain",
                                description=_clean(f"A document of the source {ref.source!r}."))
                       for ref in page],
            next_cursor=_cursor(page[-1]) if more else None)

    def _page(self, after: DocumentRef | None) -> tuple[DocumentRef, ...]:
        with self._lock:
            return self._kb.documents(after=after, limit=self._page_size + 1)


def _cursor(last: DocumentRef) -> str:
    """An opaque cursor: the last document of a page, which the next page starts after."""
    return base64.urlsafe_b64encode(json.dumps([last.source, last.key]).encode()).decode()


def _after(cursor: str | None) -> DocumentRef | None:
    """The document a cursor names; a cursor this server did not make is a client error."""
    if cursor is None:
        return None
    try:
        source, key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (binascii.Error, ValueError, TypeError) as exc:
        raise MCPError(code=INVALID_PARAMS, message=f"invalid cursor {cursor!r}") from exc
    if not (isinstance(source, str) and isinstance(key, str)):
        raise MCPError(code=INVALID_PARAMS, message=f"invalid cursor {cursor!r}")
    return DocumentRef(source, key)


class _errors:  # noqa: N801 - used as a statement, like contextlib's helpers
    """Turn a KbsyncError into a tool error the client reads (not a crash)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if isinstance(exc, KbsyncError):
            raise ToolError(_clean(str(exc))) from exc


_T = TypeVar("_T")


def _clean(data: _T) -> _T:
    """``data`` (a string, or JSON-ready data) without terminal control sequences in its
    strings: a client may show what a tool returns on a terminal, and a model gains
    nothing from them. The words stay; offsets still refer to the stored text."""
    if isinstance(data, str):
        return cast(_T, strip_controls(data))
    if isinstance(data, dict):
        return cast(_T, {_clean(k): _clean(v) for k, v in data.items()})
    if isinstance(data, list | tuple):
        return cast(_T, [_clean(v) for v in data])
    return data


def serve(kb: KnowledgeBase, *, allow_sync: bool = False) -> None:
    """Serve ``kb`` over stdio until the client closes the connection."""
    build_server(kb, allow_sync=allow_sync).run("stdio")
