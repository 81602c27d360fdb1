"""A running ``kbsync serve`` found through its notice file, and asked to embed a query.

A local model takes seconds to load, longer than the search it serves. ``kbsync
serve`` holds the knowledge base's embedder loaded and writes a notice next to the
store (its address, process id and embedder identity); a one-shot ``kbsync search``
that finds a live notice asks that server for the query's vector instead of
loading the model itself, and searches the store as usual. Only loopback
addresses are asked, and only a server whose embedder identity is the one the
knowledge base is configured with: the vector must be the one a local embed gives.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt

from kbsync.engine import Config

__all__ = ["announced", "notice_path", "served_query_vector"]

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")


def notice_path(config: Config) -> Path:
    """Where a running server over this knowledge base announces itself."""
    return config.state_dir / "serve.json"


@contextmanager
def announced(config: Config, url: str, embedder: str) -> Iterator[Path]:
    """Announce a server at ``url`` for as long as the block runs (the notice is then
    removed, unless another server has replaced it)."""
    path = notice_path(config)
    notice = {"url": url, "pid": os.getpid(), "embedder": embedder}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(notice), encoding="utf-8")
    os.replace(temporary, path)
    try:
        yield path
    finally:
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass


def served_query_vector(config: Config, embedder: str, query: str,
                        timeout: float = 10.0) -> npt.NDArray[np.float32] | None:
    """The vector of ``query`` from a running server with embedder ``embedder``, or None
    when none is running, it is not on this machine, or it embeds with another model."""
    try:
        notice = json.loads(notice_path(config).read_text(encoding="utf-8"))
        url, pid = str(notice["url"]), int(notice["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if notice.get("embedder") != embedder or not _alive(pid):
        return None
    if urllib.parse.urlsplit(url).hostname not in _LOOPBACK:
        return None
    address = url.rstrip("/") + "/api/query-vector?" + urllib.parse.urlencode({"q": query})
    # No proxy: the server is on this machine, and a proxy setting must not reroute it.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(address, timeout=timeout) as response:
            answer = json.loads(response.read())
    except (OSError, ValueError):  # refused, timed out, not JSON: load the model instead
        return None
    if not isinstance(answer, dict) or answer.get("embedder") != embedder:
        return None
    try:
        vector = np.asarray(answer["vector"], dtype=np.float32)
    except (KeyError, TypeError, ValueError):
        return None
    return vector if vector.ndim == 1 and len(vector) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, but not ours to ask
        return False
    return True
