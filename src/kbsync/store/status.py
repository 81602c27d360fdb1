"""What a status reads of a store (:class:`StatusReads`) and the counts it gives
(:class:`StoreStatus`).

A module of its own because ``kbsync status`` must start at once: it reads a store through
these, without the other roles (:mod:`kbsync.store.roles`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["StatusReads", "StoreStatus"]


@dataclass(frozen=True, slots=True)
class StoreStatus:
    """Counts of what the store holds."""

    documents: int
    chunks: int
    embeddings: int
    runs: int
    by_source: Mapping[str, int]
    last_run: Mapping[str, Any] | None
    vector_search: tuple[str, ...] = ()
    """How a vector search answers, one line per dimension of vectors (an index or an exact
    scan); empty where the store has nothing to say."""


@runtime_checkable
class StatusReads(Protocol):
    """What a status reads of the store: its counts and its known damage; and closing it.

    A role of its own because ``kbsync status`` needs no more, and a kind of store may read
    these without opening the whole store (:meth:`~kbsync.store.kinds.StoreKind.open_status`).
    """

    def status(self) -> StoreStatus:
        ...

    def known_damage(self) -> str | None:
        """Why the store is known to be damaged (a check failed, or the database said so
        during any command), or None. It outlives the process, beside the damaged data
        (a file beside a SQLite store, a row in PostgreSQL), until
        :meth:`~kbsync.store.Maintenance.remember_damage` forgets it (a repair or a
        rebuild that worked)."""
        ...

    def close(self) -> None:
        ...
