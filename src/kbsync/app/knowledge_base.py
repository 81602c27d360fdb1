"""The noun of the library: a knowledge base you open, sync, search and inspect.

Every front end (the command line, the MCP server, the LangChain and LlamaIndex
adapters) is a thin layer over :class:`KnowledgeBase`, and every method returns
a frozen, typed result, so what a script sees is what the command line prints.

    with KnowledgeBase.open("docs/") as kb:
        kb.sync()
        for hit in kb.search("rotate secrets", k=3):
            print(hit.score, hit.key, hit.heading)

It is one module because it is one noun: each method is a documented verb that
checks its arguments, takes the writer lock where it writes, and hands the work
to the sync drivers (:mod:`kbsync.sync`), the search (:mod:`kbsync.app.searching`)
or the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kbsync.app._maintenance import Maintaining
from kbsync.app._syncing import Syncing
from kbsync.app.results import (
    ChangedRegion,
    Collected,
    DocumentDiff,
    DocumentRef,
    Erased,
    Erasure,
    HistoryEntry,
    Rebuilt,
    RunSummary,
    Status,
    Verification,
)
from kbsync.app.searching import SEARCH_MODES, SearchMode, SearchResults
from kbsync.engine import (
    Config,
    init_config,
    load_config,
)
from kbsync.report import DocumentChange, SourceResult, SyncResult
from kbsync.sync import (
    Progress,
)

__all__ = [
    "SEARCH_MODES",
    "ChangedRegion",
    "Collected",
    "DocumentChange",
    "DocumentDiff",
    "DocumentRef",
    "Erased",
    "Erasure",
    "HistoryEntry",
    "KnowledgeBase",
    "Progress",
    "Rebuilt",
    "RunSummary",
    "SearchMode",
    "SearchResults",
    "SourceResult",
    "Status",
    "SyncResult",
    "Verification",
]


class KnowledgeBase(Syncing, Maintaining):
    """A knowledge base: its sources, its store and its embedder, from one ``kbsync.toml``.

    Open one with :meth:`open` or make one with :meth:`create`, and close it (or use
    it as a context manager). Reading (``plan``, ``search``, ``status``, ``diff``,
    ``verify``) never writes: a store that does not exist yet reads as empty (only
    damage a read finds is noted, beside the store: see :attr:`damage`).
    Writing (``sync``, ``erase``, ``gc``) creates the store and holds the writer
    lock while it runs, so one process writes at a time; a store known to be
    damaged takes no write until ``verify(repair=True)`` or :meth:`rebuild` mends it.

    The attributes ``config``, ``embedder``, ``sources`` and ``store`` are the
    configured components, for inspection and tests.
    """

    @classmethod
    def open(cls, path_or_config: str | Path | Config = ".") -> KnowledgeBase:
        """Open the knowledge base of a ``kbsync.toml`` file, its folder, or a parsed config."""
        config = path_or_config if isinstance(path_or_config, Config) else load_config(
            path_or_config)
        return cls(config)

    @classmethod
    def create(cls, path: str | Path, sources: Sequence[str | Path] = (), *,
               embedder: Mapping[str, Any] | None = None,
               store: str | None = None, exist_ok: bool = False) -> KnowledgeBase:
        """Write a new ``kbsync.toml`` in the folder ``path`` and open it.

        ``sources`` are folders (relative to ``path``, or absolute) and website URLs;
        ``embedder`` is an ``[embedder]`` table such as ``{"kind": "hashing"}`` (the
        default, offline), ``{"kind": "local"}`` or ``{"kind": "openai", ...}``;
        ``store`` is the store's path relative to ``path``.
        With ``exist_ok``, a folder that already has a ``kbsync.toml`` is opened as
        it is (so a script can run again), provided it has each of ``sources``;
        otherwise that is a ``ConfigError``.
        Nothing is read or indexed until :meth:`sync`.
        """
        config = init_config(path, [str(s) for s in sources], embedder=embedder, store=store,
                             exist_ok=exist_ok)
        return cls(config)

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KnowledgeBase({str(self.config.file)!r})"
