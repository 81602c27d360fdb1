"""The dashboard's web application: server-rendered pages and a JSON API over a knowledge base.

Read-only unless built with ``allow_actions``; then sync and erase are POST
endpoints behind :class:`~kbsync.serve.guard.Guard`, for a browser signed in by
the address ``kbsync serve`` printed. Every response carries a Content Security
Policy (scripts and styles from ``/static/`` only) and ``nosniff``. The knowledge base is shared
by the request threads, so every call to it holds one lock (SQLite connections and the
sync itself are one-at-a-time anyway).
"""

from __future__ import annotations

import glob
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import parse_qs, parse_qsl, urlencode

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbsync import __version__
from kbsync.app.knowledge_base import KnowledgeBase, SearchMode
from kbsync.errors import KbsyncError, LockedError, ParameterError
from kbsync.report import SyncResult
from kbsync.serve.chart import (
    COMPUTED_COLOUR,
    REUSED_COLOUR,
    STAGE_COLOURS,
    embeddings_chart,
    stacked_chart,
)
from kbsync.serve.guard import LOGIN_PARAMETER, TOKEN_FIELD, TOKEN_HEADER, Guard
from kbsync.serve.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from kbsync.serve.metrics import metrics_text
from kbsync.serve.openapi import openapi
from kbsync.serve.views import (
    document_view,
    hit_view,
    moved_to,
    overview,
    run_detail,
    run_summary,
    segments,
)
from kbsync.store.filters import parse_where
from kbsync.terminal import printable

__all__ = ["create_app"]

T = TypeVar("T")
_MODES = ("hybrid", "vector", "text")
FAILED_COLOUR = "#c0392b"
SAVED_COLOUR = "#8fb08a"
_READ_ONLY = "read-only dashboard: start `kbsync serve` with --allow-actions to sync or erase"


class _RefusedError(Exception):
    """A request the dashboard will not serve: an HTTP status and the reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


_SECURITY_HEADERS = {
    # Scripts and styles come from the dashboard's own files only: no inline script, so
    # text that slipped past escaping could not run, and no other site's resources.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a form's Origin "null"
}


class _Guarded:
    """Every request: refused when addressed to an unexpected host name (DNS rebinding);
    signed in when it carries the printed address's ``?token=``; answered with the
    security headers."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        # Only a page opened in the browser signs in; a form's POST never carries the secret.
        login = [v for k, v in query if k == LOGIN_PARAMETER] if scope["method"] in (
            "GET", "HEAD") else []
        if not self.guard.host_allowed(Headers(scope=scope)):
            response: Response = PlainTextResponse("unexpected Host header", 403)
        elif login and scope["path"].startswith("/api/"):
            response = JSONResponse({"error": "the address's token signs in a browser's "
                                     "page, not an API request"}, 400)
        elif login:
            response = self._sign_in(scope, login[-1], [(k, v) for k, v in query
                                                        if k != LOGIN_PARAMETER])
        else:
            await self.app(scope, receive, secured)
            return
        await response(scope, receive, secured)

    def _sign_in(self, scope: Scope, login: str, rest: list[tuple[str, str]]) -> Response:
        """The cookie for the secret of the printed address, and the way to the same page
        without it (so it stays out of the history and of what the page links to)."""
        if not self.guard.signed_in(login):
            return PlainTextResponse(
                "refused: the token in this address is not this server's; open the address "
                "the running `kbsync serve` printed", 403)
        clean = scope["path"] + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(clean, 303)
        response.set_cookie(Guard.cookie_name(_port(scope)), login, httponly=True,
                            samesite="strict", path="/")
        return response


def _port(scope: Scope) -> int | None:
    """The port the server listens on (None where the server does not say)."""
    server = scope.get("server")
    return int(server[1]) if server and server[1] is not None else None


def _where(request: Request) -> list[str]:
    """The ``where`` query parameters (``NAME=VALUE``, as ``kbsync search --where``), checked.

    Empty ones are left out (the dashboard's form always has a blank one to fill in).
    """
    where = [w.strip() for w in request.query_params.getlist("where") if w.strip()]
    try:
        parse_where(where)
    except KbsyncError as exc:
        raise _RefusedError(400, str(exc)) from None
    return where


def _int(value: str | None, default: int, low: int, high: int) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise _RefusedError(400, f"{value!r} is not a whole number") from None
    if not low <= number <= high:
        raise _RefusedError(400, f"{number} is outside {low}..{high}")
    return number


def _shown(value: Any) -> Any:
    """What a page shows of a value: a string with its control characters as visible escapes
    (autoescaping then makes it HTML); markup made by the dashboard itself as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value)
    return value


def _when(stamp: str | None) -> str:
    """An ISO timestamp as people read it: ``2026-01-31 08:15:02 UTC``."""
    if not stamp:
        return "never"
    return stamp.replace("T", " ").replace("+00:00", " UTC")


class _Dashboard:
    """The handlers, bound to one knowledge base."""

    def __init__(self, kb: KnowledgeBase, allow_actions: bool, guard: Guard) -> None:
        self.kb = kb
        self.allow_actions = allow_actions
        self.guard = guard
        self._lock = threading.Lock()
        env = jinja2.Environment(loader=jinja2.PackageLoader("kbsync.serve", "templates"),
                                 autoescape=True, undefined=jinja2.StrictUndefined,
                                 finalize=_shown)
        env.globals.update(version=__version__, actions=allow_actions, token=None,
                           token_field=TOKEN_FIELD, computed_colour=COMPUTED_COLOUR,
                           reused_colour=REUSED_COLOUR, segments=segments)
        env.filters["when"] = _when
        self.templates = Jinja2Templates(env=env)

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def locked() -> T:
            with self._lock:
                return fn(*args, **kwargs)

        return await run_in_threadpool(locked)

    def _page(self, request: Request, name: str, status_code: int = 200,
              **context: Any) -> Response:
        context["token"] = self._token_for(request)  # the forms of actions need it
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    def _cookie(self, request: Request) -> str | None:
        return request.cookies.get(Guard.cookie_name(_port(request.scope)))

    def _token_for(self, request: Request) -> str | None:
        """The write token, for a browser signed in where actions are allowed; else None."""
        if self.allow_actions and self.guard.signed_in(self._cookie(request)):
            return self.guard.token
        return None

    # -- pages ------------------------------------------------------------------------

    async def overview_page(self, request: Request) -> Response:
        data = await self._call(overview, self.kb)
        series = data["embeddings_per_run"]
        stages = list(dict.fromkeys(stage for p in series for stage in p["seconds"]))
        timed = [{"run": p["run"], **p["seconds"]} for p in series]
        # Every value in the charts is a number or escaped.
        charts = {
            "embeddings": embeddings_chart(series),
            "changed": stacked_chart(series, [("changed", REUSED_COLOUR),
                                              ("failed", FAILED_COLOUR)],
                                     "Documents changed per run"),
            "tokens": stacked_chart(series, [("tokens_embedded", COMPUTED_COLOUR),
                                             ("tokens_saved", SAVED_COLOUR)],
                                    "Tokens embedded and saved per run", " tokens"),
            "stages": stacked_chart(timed, list(zip(stages, STAGE_COLOURS * 3, strict=False)),
                                    "Sync time by stage", " s"),
        }
        return self._page(request, "overview.html", o=data,
                          charts={k: Markup(v) for k, v in charts.items()})

    async def runs_page(self, request: Request) -> Response:
        limit = _int(request.query_params.get("limit"), 50, 1, 500)
        records = await self._call(self.kb.runs, limit)
        return self._page(request, "runs.html", runs=[run_summary(r) for r in records])

    async def run_page(self, request: Request) -> Response:
        record = await self._call(self.kb.run, request.path_params["run_id"])
        if record is None:
            raise _RefusedError(404, f"no run {request.path_params['run_id']}")
        return self._page(request, "run.html", run=run_detail(record))

    async def document_page(self, request: Request) -> Response:
        moved = await self._moved(request)
        if moved is not None:
            return moved
        return self._page(request, "document.html", doc=await self._document(request))

    async def _moved(self, request: Request) -> Response | None:
        """A redirect to where a document that is not at ``key`` any more moved, if it did
        (an old run's link); None otherwise."""
        key = request.query_params.get("key")
        source = request.query_params.get("source") or None
        if not key:
            return None
        try:
            await self._call(self.kb.diff, key, source)
            return None
        except KbsyncError:
            found = await self._call(moved_to, self.kb, key, source)
        if found is None:
            return None
        query = urlencode({"key": found[1], "source": found[0]})
        return RedirectResponse(f"{request.url.path}?{query}", 307)

    async def metrics(self, request: Request) -> Response:
        def figures() -> bytes:
            records = self.kb.runs(1)
            last = SyncResult.from_dict(records[0].report) if records else None
            return metrics_text(overview(self.kb), last)

        return Response(await self._call(figures), media_type=METRICS_CONTENT_TYPE)

    async def search_page(self, request: Request) -> Response:
        query, k, mode = self._search_args(request)
        where = _where(request)
        hits = await self._call(self._search, query, k, mode, where) if query else []
        return self._page(request, "search.html", q=query, k=k, mode=mode, modes=_MODES,
                          hits=hits, where=where)

    async def sync_form(self, request: Request) -> Response:
        await self._check_action(request, form=True)
        run = await self._call(self._sync)
        return RedirectResponse(f"/runs/{run['run']}" if run["run"] else "/runs", 303)

    async def erase_form(self, request: Request) -> Response:
        fields = await self._check_action(request, form=True)
        await self._call(self._erase, fields.get("key", ""))
        return RedirectResponse("/", 303)

    # -- API --------------------------------------------------------------------------

    async def api_overview(self, request: Request) -> Response:
        return JSONResponse(await self._call(overview, self.kb))

    async def api_runs(self, request: Request) -> Response:
        limit = _int(request.query_params.get("limit"), 50, 1, 500)
        records = await self._call(self.kb.runs, limit)
        return JSONResponse([run_summary(r) for r in records])

    async def api_run(self, request: Request) -> Response:
        record = await self._call(self.kb.run, request.path_params["run_id"])
        if record is None:
            raise _RefusedError(404, f"no run {request.path_params['run_id']}")
        return JSONResponse(run_detail(record))

    async def api_document(self, request: Request) -> Response:
        moved = await self._moved(request)
        if moved is not None:
            return moved
        return JSONResponse(await self._document(request))

    async def api_search(self, request: Request) -> Response:
        query, k, mode = self._search_args(request)
        if not query:
            raise _RefusedError(400, "the query parameter q is required")
        return JSONResponse(await self._call(self._search, query, k, mode, _where(request)))

    async def api_query_vector(self, request: Request) -> Response:
        query = (request.query_params.get("q") or "").strip()
        if not query:
            raise _RefusedError(400, "the query parameter q is required")
        vector = await self._call(self.kb.query_vector, query)
        return JSONResponse({"embedder": self.kb.embedder.identity,
                             "vector": [float(x) for x in vector]})

    async def api_actions(self, request: Request) -> Response:
        return JSONResponse({"enabled": self.allow_actions,
                             "csrf_token": self._token_for(request)})

    async def api_sync(self, request: Request) -> Response:
        await self._check_action(request, form=False)
        return JSONResponse(await self._call(self._sync))

    async def api_erase(self, request: Request) -> Response:
        body = await self._check_action(request, form=False)
        key = body.get("key")
        if not isinstance(key, str) or not key:
            raise _RefusedError(400, 'the body must be {"key": "<document key>"}')
        return JSONResponse({"erased": await self._call(self._erase, key)})

    async def api_openapi(self, request: Request) -> Response:
        return JSONResponse(openapi(__version__))

    # -- shared -----------------------------------------------------------------------

    async def _document(self, request: Request) -> dict[str, Any]:
        key = request.query_params.get("key")
        if not key:
            raise _RefusedError(400, "the query parameter key is required")
        source = request.query_params.get("source") or None
        try:
            return await self._call(document_view, self.kb, key, source)
        except KbsyncError as exc:
            raise _RefusedError(404, str(exc)) from None

    def _search_args(self, request: Request) -> tuple[str, int, SearchMode]:
        params = request.query_params
        mode = params.get("mode") or self.kb.config.default_search_mode
        if mode not in _MODES:
            raise _RefusedError(400, f"unknown search mode {mode!r}: use hybrid, vector or text")
        return (params.get("q") or "").strip(), _int(params.get("k"), 10, 1, 100), cast(
            SearchMode, mode)

    def _search(self, query: str, k: int, mode: SearchMode,
                where: Sequence[str] = ()) -> list[dict[str, Any]]:
        return [hit_view(h) for h in self.kb.search(query, k=k, mode=mode,
                                                    filters=parse_where(where))]

    def _sync(self) -> dict[str, Any]:
        try:
            result = self.kb.sync(wait=False)
        except LockedError as exc:
            raise _RefusedError(409, str(exc)) from None
        latest = self.kb.runs(1)
        return {"run": latest[0].id if latest else None, "report": result.to_dict()}

    def _erase(self, key: str) -> list[dict[str, str]]:
        if not key:
            raise _RefusedError(400, "no document key given")
        # A key, not a pattern: glob characters in it match themselves.
        try:
            gone = self.kb.erase(glob.escape(key), wait=False)
        except LockedError as exc:
            raise _RefusedError(409, str(exc)) from None
        except ParameterError:  # no document has that key: nothing erased, nothing remembered
            return []
        return [{"source": d.source, "key": d.key} for d in gone.documents]

    async def _check_action(self, request: Request, *, form: bool) -> dict[str, Any]:
        """The request's fields, once it is allowed to act; refused with 403 otherwise."""
        if not self.allow_actions:
            raise _RefusedError(403, _READ_ONLY)
        raw = await request.body()
        fields: dict[str, Any] = {}
        if form:
            fields = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
            submitted = fields.get(TOKEN_FIELD)
        else:
            submitted = request.headers.get(TOKEN_HEADER)
            if raw.strip():
                try:
                    fields = json.loads(raw)
                except ValueError:
                    raise _RefusedError(400, "the body is not JSON") from None
                if not isinstance(fields, dict):
                    raise _RefusedError(400, "the body must be a JSON object")
        reason = self.guard.refusal(request.headers, submitted, self._cookie(request))
        if reason is not None:
            raise _RefusedError(403, f"refused: {reason}")
        return fields

    async def refused(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _RefusedError)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.reason}, exc.status)
        return self._page(request, "error.html", exc.status, code=exc.status,
                          reason=exc.reason)


def create_app(kb: KnowledgeBase, *, allow_actions: bool = False,
               host: str = "127.0.0.1", guard: Guard | None = None) -> Starlette:
    """The dashboard over ``kb``, expecting requests addressed to ``host``."""
    guard = guard or Guard(bound=host)
    d = _Dashboard(kb, allow_actions, guard)
    routes = [
        Route("/", d.overview_page),
        Route("/runs", d.runs_page),
        Route("/runs/{run_id:int}", d.run_page),
        Route("/document", d.document_page),
        Route("/search", d.search_page),
        Route("/actions/sync", d.sync_form, methods=["POST"]),
        Route("/actions/erase", d.erase_form, methods=["POST"]),
        Route("/api/overview", d.api_overview),
        Route("/api/runs", d.api_runs),
        Route("/api/runs/{run_id:int}", d.api_run),
        Route("/api/document", d.api_document),
        Route("/api/search", d.api_search),
        Route("/api/query-vector", d.api_query_vector),
        Route("/api/actions", d.api_actions),
        Route("/api/sync", d.api_sync, methods=["POST"]),
        Route("/api/erase", d.api_erase, methods=["POST"]),
        Route("/api/openapi.json", d.api_openapi),
        Route("/metrics", d.metrics),
        Mount("/static", StaticFiles(directory=Path(__file__).with_name("static")),
              name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(_Guarded, guard=guard)],
                     exception_handlers={_RefusedError: d.refused})
