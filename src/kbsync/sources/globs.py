"""Key globs of the sources that list paths (folders, object stores, git trees).

``*`` and ``?`` stay within one path segment, ``[...]`` is a character class, a
segment that is exactly ``**`` matches zero or more segments, and a pattern
ending in ``/`` means everything under that directory (see
:mod:`kbsync.sources.files`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from kbsync.errors import ParameterError

__all__ = ["compile_globs", "glob_directory", "glob_patterns", "glob_regex", "match_glob"]


def _segment_regex(segment: str) -> str:
    """Regex for one path segment of a glob: ``*``, ``?`` and ``[...]`` never match ``/``."""
    out: list[str] = []
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        i += 1
        if c == "*":
            while i < n and segment[i] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i
            if j < n and segment[j] in "!^":
                j += 1
            if j < n and segment[j] == "]":
                j += 1
            while j < n and segment[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
                continue
            body = segment[i:j]
            i = j + 1
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            # Escape what re would read as syntax or set operations; keep "-" for ranges.
            body = "".join("\\" + ch if ch in "\\[]^&~|" else ch for ch in body)
            out.append(f"(?!/)[{'^' if negate else ''}{body}]")
        else:
            out.append(re.escape(c))
    return "".join(out)


def glob_regex(pattern: str) -> str:
    """Translate a key glob (see the module docstring) to a regex for ``re.fullmatch``.

    Why not ``fnmatch``: its ``*`` crosses ``/``, and ``**`` has no meaning there;
    ``PurePosixPath.full_match`` would do, but only exists from Python 3.13.
    """
    p = unicodedata.normalize("NFC", pattern)
    while p.startswith("./"):
        p = p[2:]
    p = p.lstrip("/")
    if p.endswith("/"):
        p += "**"
    if not p:
        raise ParameterError(f"empty glob pattern: {pattern!r}")
    segments = [s for s in p.split("/") if s]
    # Consecutive "**" segments mean the same as one, and would backtrack badly.
    collapsed: list[str] = []
    for s in segments:
        if not (s == "**" and collapsed and collapsed[-1] == "**"):
            collapsed.append(s)
    parts: list[str] = []
    last = len(collapsed) - 1
    for i, s in enumerate(collapsed):
        if s == "**":
            parts.append(".*" if i == last else "(?:.*/)?")
        else:
            parts.append(_segment_regex(s) + ("" if i == last else "/"))
    return "".join(parts)


def match_glob(pattern: str, key: str) -> bool:
    """Whether ``key`` matches the glob ``pattern`` (see the module docstring)."""
    return re.fullmatch(glob_regex(pattern), key, re.DOTALL) is not None


def glob_patterns(patterns: Iterable[str] | str, what: str) -> tuple[str, ...]:
    """The globs as a tuple; a lone string is one glob, not a sequence of one-letter globs."""
    items = (patterns,) if isinstance(patterns, str) else tuple(patterns)
    for p in items:
        if not isinstance(p, str):
            raise ParameterError(f"{what} patterns must be strings, got {p!r}")
    return items


def compile_globs(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for a set of globs, ``None`` when there are none."""
    regexes = [f"(?:{glob_regex(p)})" for p in patterns]
    return re.compile("|".join(regexes), re.DOTALL) if regexes else None


def glob_directory(pattern: str) -> str | None:
    """The directory a glob means in full (``build/**``, ``build/`` -> ``build``), if any."""
    p = pattern.rstrip("/")
    if pattern.endswith("/"):
        return p or None
    if p.endswith("/**"):
        return p[:-3].rstrip("/") or None
    return None
