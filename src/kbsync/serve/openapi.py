"""The OpenAPI 3.1 description of the dashboard's JSON API (served at /api/openapi.json)."""

from __future__ import annotations

from typing import Any

__all__ = ["openapi"]

_INT = {"type": "integer"}
_STR = {"type": "string"}
_NUM = {"type": "number"}
_OPT_STR = {"type": ["string", "null"]}
_OPT_NUM = {"type": ["number", "null"]}
_COUNTS = {"type": "object", "additionalProperties": _INT}
_KIND = {"enum": ["unchanged", "cosmetic", "substantive", None],
         "description": "What the edit is, by what changed; None for a first version or a "
                        "run recorded before edits were classified"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return {"type": "object", "required": sorted(required),
            "properties": {**required, **optional}}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERROR = _json(_ref("Error"), "An error, with its reason")
_KEY = {"name": "key", "in": "query", "required": True, "schema": _STR,
        "description": "The document's key (relative path or URL)"}
_SOURCE = {"name": "source", "in": "query", "required": False, "schema": _STR,
           "description": "The source's name (when two sources hold the same key)"}
_TOKEN = {"name": "X-CSRF-Token", "in": "header", "required": True, "schema": _STR,
          "description": "This server's token, from GET /api/actions with the sign-in "
                         "cookie (set by opening the address kbsync serve printed)"}

_SCHEMAS: dict[str, Any] = {
    "Error": _obj({"error": _STR}),
    "Source": _obj({"name": _STR, "kind": {"enum": ["folder", "web", "removed"]},
                    "location": _STR, "documents": _INT}),
    "Change": _obj({"source": _STR, "key": _STR, "action": _STR},
                   verdict=_OPT_STR, kind=_KIND, reason=_STR, similarity=_OPT_NUM, run=_INT,
                   finished=_STR,
                   **{"from": _OPT_STR}),
    "Overview": _obj({
        "documents": _INT, "chunks": _INT, "embeddings": _INT, "runs": _INT,
        "last_sync": _OPT_STR,
        "sources": {"type": "array", "items": _ref("Source")},
        "embeddings_per_run": {"type": "array", "items": {"allOf": [
            _ref("Vectors"), _obj({"run": _INT, "finished": _STR})]}},
        "recent_changes": {"type": "array", "items": _ref("Change")},
    }),
    "Vectors": {**_obj({"computed": _INT, "reused": _INT, "kept": _INT}),
                "description": "Embeddings computed; reused (chunks new to their document "
                               "that needed no embedding: the cache held their vector, or "
                               "the run embedded their text for another chunk; the "
                               "report's embeddings_reused); kept (chunks of changed "
                               "documents that kept their vector, in place or moved)"},
    "RunSummary": _obj({"id": _INT, "started": _STR, "finished": _STR, "seconds": _NUM,
                        "documents": _COUNTS, "embeddings": _ref("Vectors"),
                        "failures": _INT}),
    "Run": {"allOf": [_ref("RunSummary"), _obj({
        "failure_list": {"type": "array",
                         "items": _obj({"source": _STR, "key": _STR, "message": _STR})},
        "changes": {"type": "array", "items": _ref("Change")},
        "sources": {"type": "array", "items": _obj({
            "source": _STR, "documents": _COUNTS, "chunks": _COUNTS,
            "embeddings": _ref("Vectors"), "bytes_read": _INT,
            "listing_complete": {"type": "boolean"},
            "warnings": {"type": "array", "items": _STR}})},
        "report": {"type": "object", "description": "The full sync report, as "
                   "`kbsync sync --json` prints it"},
    })]},
    "Region": _obj({"offset": _INT, "length": _INT, "text": _STR}),
    "Document": _obj({
        "source": _STR, "key": _STR, "title": _OPT_STR,
        "last_changed": _STR, "first_version": {"type": "boolean"},
        "verdict": {"enum": ["unchanged", "cosmetic", "reprocess", "reexamine-extraction",
                             None], "description": "None for a first version"},
        "kind": _KIND,
        "reason": {"type": "string", "description": "The change that decides the kind: "
                   "the first substantive one (`number 950 → 975`, `heading \"Install\" → "
                   "\"Installation\"`, `12 words changed`), or what a cosmetic edit changed "
                   "(`punctuation, case`)"},
        "similarity": _OPT_NUM,
        "added": {"type": "array", "items": _ref("Region"),
                  "description": "Regions of the current text not in the previous one "
                  "(a finer comparison than the similarity's; none for a first version)"},
        "removed": {"type": "array", "items": _ref("Region"),
                    "description": "Regions of the previous text not in the current one"},
        "text": _STR, "previous": _OPT_STR,
        "moved_from": {"type": ["string", "null"],
                       "description": "The key before the document's last move, if any"},
        "moved": _OPT_STR,
        "history": {"type": "array", "items": _obj({
            "run": _INT, "finished": _STR, "source": _STR, "action": _STR,
            "verdict": _OPT_STR, "kind": _KIND, "reason": _STR, "similarity": _OPT_NUM,
            "regions": _INT})},
    }),
    "Hit": _obj({"source": _STR, "key": _STR, "title": _OPT_STR, "heading": _OPT_STR,
                 "index": _INT,
                 "rank": {"type": "integer", "minimum": 1, "description": "1 is the best"},
                 "relevance": {"type": "number", "minimum": 0, "maximum": 1,
                               "description": "vector: cosine clipped to [0, 1]; text: BM25 "
                               "over the best hit's; hybrid: the mean of the two"},
                 "score": {"type": "number", "description": "The ranking's raw value"},
                 "text": _STR, "context": _STR}),
}


def _get(summary: str, ok: dict[str, Any], *, params: tuple[dict[str, Any], ...] = (),
         missing: bool = False) -> dict[str, Any]:
    responses = {"200": ok}
    if missing:
        responses["404"] = _ERROR
    return {"get": {"summary": summary, "parameters": list(params), "responses": responses}}


def _post(summary: str, ok: dict[str, Any], body: dict[str, Any] | None = None,
          ) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary, "parameters": [_TOKEN],
        "responses": {"200": ok, "403": _json(_ref("Error"), "Actions are off (start with "
                      "--allow-actions), or the request is cross-site, lacks the sign-in cookie or "
                      "the token")},
    }
    if body is not None:
        operation["requestBody"] = {"required": True,
                                    "content": {"application/json": {"schema": body}}}
    return {"post": operation}


def openapi(version: str) -> dict[str, Any]:
    """The description of every endpoint under /api/."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "kbsync dashboard API", "version": version,
                 "description": "Read what a kbsync knowledge base holds and how its syncs "
                                "went; with --allow-actions, sync and erase."},
        "paths": {
            "/api/overview": _get("Counts, sources, the last sync and embeddings per run",
                                  _json(_ref("Overview"), "The overview")),
            "/api/runs": _get("The latest runs, newest first",
                              _json({"type": "array", "items": _ref("RunSummary")}, "Runs"),
                              params=({"name": "limit", "in": "query", "required": False,
                                       "schema": {"type": "integer", "minimum": 1,
                                                  "maximum": 500, "default": 50}},)),
            "/api/runs/{run_id}": _get("One run: its report, failures and changes",
                                       _json(_ref("Run"), "The run"), missing=True,
                                       params=({"name": "run_id", "in": "path",
                                                "required": True, "schema": _INT},)),
            "/api/document": _get("A document: its last change and its history",
                                  _json(_ref("Document"), "The document"),
                                  params=(_KEY, _SOURCE), missing=True),
            "/api/search": _get("Search the current chunks",
                                _json({"type": "array", "items": _ref("Hit")}, "Results"),
                                params=(
                                    {"name": "q", "in": "query", "required": True,
                                     "schema": _STR},
                                    {"name": "k", "in": "query", "required": False,
                                     "schema": {"type": "integer", "minimum": 1,
                                                "maximum": 100, "default": 10}},
                                    {"name": "mode", "in": "query", "required": False,
                                     "description": "default: the configuration's [search] "
                                     "mode, else text with the hashing embedder, hybrid with "
                                     "a model",
                                     "schema": {"enum": ["hybrid", "vector", "text"]}},
                                    {"name": "where", "in": "query", "required": False,
                                     "description": "NAME=VALUE, NAME!=VALUE or NAME<VALUE "
                                     "(<=, >, >= on numbers and dates), repeatable (as `kbsync "
                                     "search --where`): source, path, title or a metadata key; "
                                     "* and ? are globs; a list matches when one item does; "
                                     "all hold (AND), the same NAME=… twice either value (OR)",
                                     "schema": {"type": "array", "items": _STR},
                                     "style": "form", "explode": True})),
            "/api/query-vector": _get(
                "The query's vector from this server's embedder (what `kbsync search` asks a "
                "running server for, so it need not load the model)",
                _json(_obj({"embedder": _STR, "vector": {"type": "array", "items": _NUM}}),
                      "The embedder's identity and the vector"),
                params=({"name": "q", "in": "query", "required": True, "schema": _STR},)),
            "/api/actions": _get("Whether actions are allowed, and the token they need "
                                 "(null without the sign-in cookie)",
                                 _json(_obj({"enabled": {"type": "boolean"},
                                             "csrf_token": _OPT_STR}), "Actions")),
            "/api/sync": _post("Sync now", _json(_obj({"run": {"type": ["integer", "null"]},
                                                       "report": {"type": "object"}}),
                                                 "The new run and its report")),
            "/api/erase": _post("Erase a document and everything derived from it",
                                _json(_obj({"erased": {"type": "array", "items": _obj(
                                    {"source": _STR, "key": _STR})}}), "What was erased"),
                                _obj({"key": _STR})),
            "/api/openapi.json": _get("This description",
                                      _json({"type": "object"}, "OpenAPI 3.1")),
        },
        "components": {"schemas": _SCHEMAS},
    }
