"""The status of a knowledge base: what its store holds, its last run, the process writing
now, and whether the store is known to be damaged.

``kbsync status`` is what people and scripts run to look, often and first: read through
:func:`read_status`, it takes the configuration's store, embedder and sources
(:func:`~kbsync.engine.load_outline`) and the store's reads of a status
(:func:`~kbsync.engine.open_status`: of a SQLite store, its file without the store), and
imports no sync, chunking core, extractor or NumPy. :meth:`KnowledgeBase.status` gives the
same value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbsync.engine import Outline, load_outline, make_embedder, open_status, writer_lock
from kbsync.report import SyncResult
from kbsync.store import StatusReads
from kbsync.store.guard import REPAIR

__all__ = ["RunSummary", "Status", "damage_said", "read_status", "status_of"]


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The last recorded sync: when it ran and its document counts per action."""

    started: str
    finished: str
    documents: Mapping[str, int]
    interrupted: bool = False
    """Whether it stopped before its end (Ctrl-C, SIGTERM, a refusal, an error)."""
    applied: int = 0
    """Documents it wrote to the store."""
    failures: tuple[tuple[str, str, str], ...] = ()
    """``(source, key, message)`` of each document it could not take, by source name and
    key (as many as its report kept)."""
    still_failing: tuple[tuple[str, str, str], ...] = ()
    """``(source, key, message)`` of each document that failed as it failed before, unchanged
    since (not read again), by source name and key: still not in the index."""
    unlisted: tuple[str, ...] = ()
    """The sources it could not list in full (a folder gone, a site down): it deleted
    nothing of them, so their documents are those of an earlier listing."""


@dataclass(frozen=True, slots=True)
class Status:
    """What the knowledge base holds, and how it is configured."""

    config: Path
    """The ``kbsync.toml`` file."""
    sources: tuple[str, ...]
    """The configured sources' names, by name (as every list of sources here is)."""
    embedder: str
    """The identity of the configured embedder (model, parameters, dimension)."""
    documents: int
    chunks: int
    """Chunks of the current generation of every document."""
    embeddings: int
    """Vectors in the embedding cache (all embedders)."""
    runs: int
    by_source: Mapping[str, int]
    """Documents per source, by name."""
    last_run: RunSummary | None
    writer: str | None = None
    """The process writing to the knowledge base now (a sync, say: ``"pid 123"``), if any."""
    damage: str | None = None
    """Why the store is known to be damaged (a check failed, or the database said so), if it
    is: writes wait for ``kbsync verify --repair`` or ``kbsync rebuild``."""
    vector_search: tuple[str, ...] = ()
    """How a vector search answers, per dimension of vectors (an index, or an exact scan)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "config": str(self.config), "sources": list(self.sources), "embedder": self.embedder,
            "documents": self.documents, "chunks": self.chunks, "embeddings": self.embeddings,
            "runs": self.runs, "by_source": dict(self.by_source), "writer": self.writer,
            "damage": self.damage, "vector_search": list(self.vector_search),
            "last_run": None if self.last_run is None else {
                "started": self.last_run.started, "finished": self.last_run.finished,
                "documents": dict(self.last_run.documents),
                "interrupted": self.last_run.interrupted, "applied": self.last_run.applied,
                "failures": [{"source": s, "key": k, "message": m}
                             for s, k, m in self.last_run.failures],
                "still_failing": [{"source": s, "key": k, "message": m}
                                  for s, k, m in self.last_run.still_failing],
                "unlisted": list(self.last_run.unlisted)},
        }


def read_status(path: str | Path = ".") -> Status:
    """The status of the knowledge base of a ``kbsync.toml`` file or its folder; a store
    that does not exist yet reads as empty."""
    outline = load_outline(path)
    identity = make_embedder(outline.embedder).identity
    store = open_status(outline)
    try:
        return status_of(outline, store, identity)
    finally:
        store.close()


def status_of(config: Outline, store: StatusReads, embedder: str) -> Status:
    """The status of ``store``, configured by ``config`` with the embedder ``embedder`` (its
    identity).

    Sources are listed by name everywhere (the configured ones, the counts per source,
    the last run's failures and unlisted sources), so the lines for people and the JSON
    agree, whatever order the configuration or the database gives them in.
    """
    st = store.status()
    last = None if st.last_run is None else SyncResult.from_dict(st.last_run)
    reason = store.known_damage()
    return Status(
        config=config.file, sources=tuple(sorted(s.name for s in config.sources)),
        embedder=embedder, documents=st.documents, chunks=st.chunks,
        embeddings=st.embeddings, runs=st.runs, by_source=dict(sorted(st.by_source.items())),
        last_run=None if last is None else RunSummary(
            last.started, last.finished, dict(last.documents), interrupted=last.interrupted,
            applied=sum(s.documents_applied for s in last.sources),
            failures=tuple(sorted((s.source, key, message) for s in last.sources
                                  for key, message in s.failures)),
            still_failing=tuple(sorted((s.source, key, message) for s in last.sources
                                       for key, message in s.still_failing)),
            unlisted=tuple(sorted(s.source for s in last.sources if not s.listing_complete))),
        writer=writer_lock(config, wait=False).holder(),
        damage=None if reason is None else damage_said(config, reason, writing=False),
        vector_search=tuple(st.vector_search))


def damage_said(config: Outline, reason: str, *, writing: bool) -> str:
    """The one line that says a store is known to be damaged, and why: the error of a write
    it refuses (``writing``), or the warning of a read."""
    store = config.store_location
    mend = REPAIR if config.store_kind.capabilities.rebuild else (
        "run `kbsync verify --repair` (damage to the database's own pages and indexes is "
        "mended with its tools: REINDEX, a restore)")
    if writing:
        return (f"{store}: the store is known to be damaged ({reason}), so nothing is written "
                f"to it until it is mended: {mend}")
    return (f"{store}: the store is known to be damaged ({reason}); what it answers may be "
            f"wrong or incomplete, and writes wait: {mend}")
