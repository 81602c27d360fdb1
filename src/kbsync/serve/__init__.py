"""The local web dashboard (``kbsync serve``): pages and a JSON API over the library.

- :mod:`.app`: the Starlette application (pages, API, actions)
- :mod:`.views`: what the pages and the API show, as JSON-ready data
- :mod:`.chart`: the server-drawn SVG chart of embeddings per run
- :mod:`.guard`: host, origin and token checks against cross-site requests
- :mod:`.openapi`: the API's OpenAPI description

Needs the ``serve`` extra (starlette, jinja2, uvicorn).
"""

from __future__ import annotations

from kbsync.errors import DependencyMissingError

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise DependencyMissingError("The dashboard", "serve", exc.name or "starlette",
                                 exc) from exc

from urllib.parse import urlencode

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.app.served import announced
from kbsync.serve.app import create_app
from kbsync.serve.guard import LOGIN_PARAMETER, Guard, is_loopback

__all__ = ["Guard", "create_app", "is_loopback", "serve", "sign_in_address"]


def serve(kb: KnowledgeBase, *, host: str = "127.0.0.1", port: int = 8765,
          allow_actions: bool = False, guard: Guard | None = None) -> None:
    """Serve the dashboard over ``kb`` until interrupted, announcing it to ``kbsync search``
    (which then asks it for query vectors instead of loading the model). ``guard`` holds
    the secrets of :func:`sign_in_address` (a fresh one by default)."""
    app = create_app(kb, allow_actions=allow_actions, host=host, guard=guard or Guard(bound=host))
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           server_header=False))
    reachable = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    with announced(kb.config, f"http://{_bracketed(reachable)}:{port}/", kb.embedder.identity):
        server.run()


def sign_in_address(host: str, port: int, guard: Guard) -> str:
    """The address to open the dashboard at, signing the browser in (``?token=``): only the
    browser that opens it may sync and erase. Printed, never written to a file."""
    return f"http://{_bracketed(host)}:{port}/?{urlencode({LOGIN_PARAMETER: guard.login})}"


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
