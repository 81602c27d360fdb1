"""Erasures: what the store keeps of ``kbsync erase`` patterns, and which keys they cover."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable

from kbsync.core.identity import erased_key_hash

__all__ = ["erasure_matcher", "is_key_hash", "tombstone"]


_GLOB = re.compile(r"[*?\[]")


_KEY_HASH = "blake2b:"


def tombstone(pattern: str) -> str:
    """What the store keeps of an erasure: a glob as given, an exact key only as its hash.

    Erasure leaves no byte of an erased document in the store, its key included; a
    glob is kept as typed (it is needed to match), so it is the user's to word.
    """
    if _GLOB.search(pattern):
        return pattern
    return _KEY_HASH + erased_key_hash(pattern)


def is_key_hash(stored: str) -> bool:
    """Whether a tombstone as stored is the hash of an exact key (not a glob)."""
    return stored.startswith(_KEY_HASH) and not _GLOB.search(stored)


def erasure_matcher(erasures: Iterable[tuple[str, str]]) -> Callable[[str], bool] | None:
    """Whether a key is covered by the tombstones ``(stored, created)``; None without any.

    Globs are those of ``kbsync erase``: shell-style and case-sensitive, as
    :func:`fnmatch.fnmatchcase` reads them; exact keys are compared by hash.
    """
    stored = [s for s, _ in erasures]
    hashes = {s for s in stored if is_key_hash(s)}
    globs = [f"(?:{fnmatch.translate(s)})" for s in stored if s not in hashes]
    regex = re.compile("|".join(globs)) if globs else None
    if regex is None and not hashes:
        return None

    def covers(key: str) -> bool:
        return (regex is not None and regex.match(key) is not None) or (
            bool(hashes) and tombstone(key) in hashes)

    return covers
