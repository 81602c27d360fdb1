"""Digests of big files remembered by their stat, in the per-user cache folder.

Every command that builds the local embedder hashes its weights (90 MB, 0.2 s) for the
embedder's identity, and a search that runs the cached ONNX export checks its digest
(0.3 s): most of a one-shot search's time once torch is out of it. A digest is
remembered under the files' path, size, inode, mtime and ctime, and trusted only when it
was computed well after the files last changed (a write in the same tick as the hashing
could leave the stat unchanged); any write changes the ctime, so a changed file is
hashed again.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["MEMO_FILE", "remembered"]

MEMO_FILE = "digests.json"
_SETTLED_NS = 2_000_000_000  # a digest taken this long after the last change is trusted
_KEPT = 64  # entries kept: a few models, each with its weights and exports


def remembered(name: str, files: Sequence[Path], compute: Callable[[], str],
               folder: Path) -> str:
    """``compute()``, the digest ``name`` of ``files``, remembered in ``folder`` while
    the files' stats stay as they were; the cache is best effort (an unreadable or
    unwritable folder only means computing it)."""
    try:
        stats = [_stat(path) for path in files]
    except OSError:
        return compute()
    key = json.dumps([name, stats])
    memo_path = folder / MEMO_FILE
    memo = _read(memo_path)
    entry = memo.get(key)
    changed = max((max(s[3], s[4]) for s in stats), default=0)
    if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) \
            and isinstance(entry[1], int) and entry[1] > changed + _SETTLED_NS:
        return entry[0]
    value = compute()
    memo[key] = [value, time.time_ns()]
    _write(memo_path, dict(list(memo.items())[-_KEPT:]))
    return value


def _stat(path: Path) -> tuple[str, int, int, int, int]:
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, memo: dict[str, object]) -> None:
    """Written aside and renamed into place: a reader sees the old file or the new one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".digests-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(memo, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass
