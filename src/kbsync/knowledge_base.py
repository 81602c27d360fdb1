"""The noun of the library: a knowledge base you open, sync, search and inspect.

Every front end (the command line, the MCP server, the LangChain and LlamaIndex
adapters) is a thin layer over :class:`KnowledgeBase`, and every method returns
a frozen, typed result, so what a script sees is what the command line prints.

    with KnowledgeBase.open("docs/") as kb:
        kb.sync()
        for hit in kb.search("rotate secrets", k=3):
            print(hit.score, hit.key, hit.heading)
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from kbsync.chunking import identity_for
from kbsync.compare import compare
from kbsync.engine import (
    Config,
    check_fit,
    init_config,
    load_config,
    make_embedder,
    make_sink,
    make_sources,
    open_store,
    store_exists,
)
from kbsync.errors import KbsyncError, ParameterError
from kbsync.extract.registry import extractor_for
from kbsync.mirror import Reconciliation, reconcile
from kbsync.mirror import erase as erase_vectors
from kbsync.model import ChangeReport, ChunkingDiagnostics, Verdict
from kbsync.normalize import normalize
from kbsync.report import diagnostics_dict
from kbsync.store import DocumentText, Hit
from kbsync.store.lock import WriterLock
from kbsync.sync import Progress, SyncReport, report_dict, sync_sources
from kbsync.watch import watch

__all__ = [
    "SEARCH_MODES",
    "ChangedRegion",
    "Collected",
    "DocumentChange",
    "DocumentDiff",
    "DocumentRef",
    "Erased",
    "KnowledgeBase",
    "Progress",
    "RunSummary",
    "SearchMode",
    "SourceResult",
    "Status",
    "SyncResult",
    "Verification",
]

SearchMode = Literal["vector", "text", "hybrid"]
"""How :meth:`KnowledgeBase.search` ranks: embeddings, full text, or both fused."""
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
# Reciprocal rank fusion constant: ranks deeper than a few dozen barely count.
_RRF_K = 60


@dataclass(frozen=True, slots=True)
class DocumentRef:
    """A document of the knowledge base: its source's name and its key (path or URL)."""

    source: str
    key: str


@dataclass(frozen=True, slots=True)
class DocumentChange:
    """One document a sync touched: the action taken and, for an edit, how its text changed."""

    key: str
    action: str
    change: ChangeReport | None


@dataclass(frozen=True, slots=True)
class SourceResult:
    """What one sync (or plan) did to one source.

    ``documents`` counts documents per action (``new``, ``modified``, ``deleted``...),
    ``chunks`` counts chunks per fate (``kept``, ``moved``, ``added``, ``deleted``);
    both read 0 for a name they do not hold. ``changes`` lists every document the
    run acted on, with the text change of each edit.
    A source whose listing failed (``listing_complete`` false) deleted nothing.
    """

    source: str
    documents: Mapping[str, int]
    chunks: Mapping[str, int]
    bytes_read: int
    bytes_skipped: int
    skipped_unsupported: int
    embeddings_computed: int
    embeddings_reused: int
    embedding_tokens: int
    embeddings_truncated: int
    embeddings_backfill: int
    boilerplate_chunks: int
    vectors_upserted: int
    vectors_deleted: int
    listing_complete: bool
    deletions_blocked: bool
    failures: tuple[tuple[str, str], ...]
    """``(key, message)`` of each document that failed; the key is empty for the listing."""
    warnings: tuple[str, ...]
    changes: tuple[DocumentChange, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data, as stored in the run's report."""
        return {
            "source": self.source,
            "documents": dict(self.documents),
            "chunks": dict(self.chunks),
            "bytes_read": self.bytes_read,
            "bytes_skipped": self.bytes_skipped,
            "skipped_unsupported": self.skipped_unsupported,
            "embeddings_computed": self.embeddings_computed,
            "embeddings_reused": self.embeddings_reused,
            "embedding_tokens": self.embedding_tokens,
            "embeddings_truncated": self.embeddings_truncated,
            "embeddings_backfill": self.embeddings_backfill,
            "boilerplate_chunks": self.boilerplate_chunks,
            "vectors_upserted": self.vectors_upserted,
            "vectors_deleted": self.vectors_deleted,
            "listing_complete": self.listing_complete,
            "deletions_blocked": self.deletions_blocked,
            "failures": [{"key": k, "message": m} for k, m in self.failures],
            "warnings": list(self.warnings),
            "changes": [_change_dict(c) for c in self.changes],
        }


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The report of one sync, or of a plan (``dry_run``: what a sync would do).

    ``documents`` sums the document actions over sources; ``seconds`` is the time
    spent per stage; ``diagnostics`` describes the chunks made in this run.
    """

    dry_run: bool
    started: str
    finished: str
    documents: Mapping[str, int]
    sources: tuple[SourceResult, ...]
    seconds: Mapping[str, float]
    diagnostics: ChunkingDiagnostics | None

    @property
    def failed(self) -> bool:
        """Whether a document failed, a listing was incomplete or deletions were blocked."""
        return any(s.failures or s.deletions_blocked or not s.listing_complete
                   for s in self.sources)

    def total(self, action: str) -> int:
        """How many documents took ``action`` (e.g. ``"new"``), over every source."""
        return self.documents.get(action, 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: what ``--json`` prints and the store keeps for the run."""
        return {
            "dry_run": self.dry_run,
            "started": self.started,
            "finished": self.finished,
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
            "documents": dict(self.documents),
            "sources": [s.to_dict() for s in self.sources],
            "diagnostics": diagnostics_dict(self.diagnostics) if self.diagnostics else None,
        }


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The last recorded sync: when it ran and its document counts per action."""

    started: str
    finished: str
    documents: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Status:
    """What the knowledge base holds, and how it is configured."""

    config: Path
    """The ``kbsync.toml`` file."""
    sources: tuple[str, ...]
    """The configured sources' names."""
    embedder: str
    """The identity of the configured embedder (model, parameters, dimension)."""
    documents: int
    chunks: int
    """Chunks of the current generation of every document."""
    embeddings: int
    """Vectors in the embedding cache (all embedders)."""
    runs: int
    by_source: Mapping[str, int]
    """Documents per source."""
    last_run: RunSummary | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "config": str(self.config), "sources": list(self.sources), "embedder": self.embedder,
            "documents": self.documents, "chunks": self.chunks, "embeddings": self.embeddings,
            "runs": self.runs, "by_source": dict(self.by_source),
            "last_run": None if self.last_run is None else {
                "started": self.last_run.started, "finished": self.last_run.finished,
                "documents": dict(self.last_run.documents)},
        }


@dataclass(frozen=True, slots=True)
class ChangedRegion:
    """A run ``[offset, offset + length)`` of the current text that the last change made."""

    offset: int
    length: int
    text: str


@dataclass(frozen=True, slots=True)
class DocumentDiff:
    """The last change of a document: its current and previous text and how they differ.

    ``verdict`` routes the change (cosmetic, an ordinary edit, or a text so different
    that the extraction deserves a look); ``similarity`` is in [0, 1]. A document seen
    once has no ``previous`` text: it is all one added region.
    """

    source: str
    key: str
    title: str | None
    last_changed: str
    verdict: Verdict
    similarity: float
    regions: tuple[ChangedRegion, ...]
    text: str
    previous: str | None
    change: ChangeReport

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (without the full texts)."""
        return {"key": self.key, "source": self.source, "verdict": str(self.verdict),
                "similarity": self.similarity, "last_changed": self.last_changed,
                "regions": [{"offset": r.offset, "length": r.length, "text": r.text}
                            for r in self.regions]}


@dataclass(frozen=True, slots=True)
class Verification:
    """The result of checking every invariant of the store; ``problems`` empty when sound."""

    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class Erased:
    """The documents an erasure removed, with every row, text and vector derived from them."""

    documents: tuple[DocumentRef, ...]


@dataclass(frozen=True, slots=True)
class Collected:
    """What garbage collection removed: a count per kind of row (store-specific names)."""

    removed: Mapping[str, int]


class KnowledgeBase:
    """A knowledge base: its sources, its store and its embedder, from one ``kbsync.toml``.

    Open one with :meth:`open` or make one with :meth:`create`, and close it (or use
    it as a context manager). Reading (``plan``, ``search``, ``status``, ``diff``,
    ``verify``) never writes: a store that does not exist yet reads as empty.
    Writing (``sync``, ``erase``, ``gc``) creates the store and holds the writer
    lock while it runs, so one process writes at a time.

    The attributes ``config``, ``embedder``, ``sources`` and ``store`` are the
    configured components, for inspection and tests.
    """

    def __init__(self, config: Config) -> None:
        """Build the components a configuration names (see :meth:`open`)."""
        self.config = config
        self.embedder = make_embedder(config.embedder)
        check_fit(config.chunker, self.embedder, config.embedder)
        self._created = store_exists(config)
        self.store = open_store(config, create=False)
        self.sink = make_sink(config.vectors, config.root) if self._created else None
        self._progress: Progress | None = None
        self.sources = make_sources(config, self._crawled)

    @classmethod
    def open(cls, path_or_config: str | Path | Config = ".") -> KnowledgeBase:
        """Open the knowledge base of a ``kbsync.toml`` file, its folder, or a parsed config."""
        config = path_or_config if isinstance(path_or_config, Config) else load_config(
            path_or_config)
        return cls(config)

    @classmethod
    def create(cls, path: str | Path, sources: Sequence[str | Path] = (), *,
               embedder: Mapping[str, Any] | None = None,
               store: str | None = None) -> KnowledgeBase:
        """Write a new ``kbsync.toml`` in the folder ``path`` and open it.

        ``sources`` are folders (relative to ``path``, or absolute) and website URLs;
        ``embedder`` is an ``[embedder]`` table such as ``{"kind": "hashing"}`` (the
        default, offline), ``{"kind": "local"}`` or ``{"kind": "openai", ...}``;
        ``store`` is the store's path relative to ``path``.
        Nothing is read or indexed until :meth:`sync`.
        """
        config = init_config(path, [str(s) for s in sources], embedder=embedder, store=store)
        return cls(config)

    # -- life cycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (and the vector store). The knowledge base cannot be used afterwards."""
        if self.sink is not None:
            self.sink.close()
        self.store.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KnowledgeBase({str(self.config.file)!r})"

    def _crawled(self, url: str, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress("crawl", done, total)

    def _create_store(self) -> None:
        """Replace the empty stand-in of a store that did not exist by the real one."""
        if not self._created:
            self.store.close()
            self.store = open_store(self.config, create=True)
            self.sink = make_sink(self.config.vectors, self.config.root)
            self._created = True

    def _writing(self, wait: bool, on_wait: Callable[[str], None] | None) -> WriterLock:
        """The writer lock, with the store created first if it was not yet."""
        self._create_store()
        return WriterLock(self.config.lock_path, wait=wait, on_wait=on_wait)

    # -- syncing ----------------------------------------------------------------------

    def plan(self, *, progress: Progress | None = None) -> SyncResult:
        """What a sync would do (documents, chunks to embed, tokens), writing nothing.

        ``progress(stage, done, total)`` is called as the work advances.
        """
        self._progress = progress
        return _sync_result(sync_sources(
            self.sources, self.store, self.embedder, extractor_for, self.config.chunker,
            dry_run=True, progress=progress, sink=self.sink, **self._index_settings()))

    def sync(self, *, progress: Progress | None = None, verify: bool = False,
             allow_mass_delete: bool = False, wait: bool = True,
             on_wait: Callable[[str], None] | None = None) -> SyncResult:
        """Bring the store in step with the sources, doing the least work that is correct.

        Args:
            progress: called as ``progress(stage, done, total)`` while the work advances.
            verify: read every file even when its size and time are unchanged.
            allow_mass_delete: allow deleting more than half of a source's documents.
            wait: wait for another writer; when false a held lock raises ``LockedError``.
            on_wait: told once, with a message, when the sync has to wait for the lock.
        """
        self._progress = progress
        with self._writing(wait, on_wait):
            return _sync_result(sync_sources(
                self.sources, self.store, self.embedder, extractor_for, self.config.chunker,
                verify=verify, allow_mass_delete=allow_mass_delete, progress=progress,
                sink=self.sink, **self._index_settings()))

    def _index_settings(self) -> dict[str, Any]:
        index = self.config.index
        return {"boilerplate_share": float(index.get("boilerplate_share", 0.05)),
                "index_boilerplate": bool(index.get("index_boilerplate", False))}

    def watch(self, *, interval: float = 86_400.0, full_every: float = 30 * 86_400.0,
              stop: threading.Event | None = None,
              on_report: Callable[[SyncResult, str], None] | None = None) -> None:
        """Sync on file events and every ``interval`` seconds, with a full revalidation
        (``verify``) every ``full_every``, until ``stop`` is set.

        ``on_report(result, reason)`` receives each run's result and why it ran.
        """
        folders = [self.config.root / s.path for s in self.config.sources if not s.is_web]

        def report(raw: SyncReport, reason: str) -> None:
            if on_report is not None:
                on_report(_sync_result(raw), reason)

        # Created before the folders are watched: its creation is no change of a source.
        self._create_store()
        # watch() drives the orchestrator's own report type; results are converted here.
        watch(lambda verify: self._sync_raw(verify), folders, interval=interval,
              full_every=full_every, stop=stop, on_report=report,
              ignore=[self.config.store_path.parent, self.config.lock_path])

    def _sync_raw(self, verify: bool) -> SyncReport:
        with self._writing(True, None):
            return sync_sources(self.sources, self.store, self.embedder, extractor_for,
                                self.config.chunker, verify=verify, sink=self.sink,
                                **self._index_settings())

    # -- reading ----------------------------------------------------------------------

    def search(self, query: str, k: int = 5, mode: SearchMode = "hybrid",
               context_tokens: int | None = None) -> list[Hit]:
        """The chunks of the current documents that best match ``query``, best first.

        Args:
            query: what to look for, in words.
            k: how many results.
            mode: ``"vector"`` (embedding similarity), ``"text"`` (full text) or
                ``"hybrid"`` (both, fused by reciprocal rank).
            context_tokens: return each hit with its neighbouring chunks of the same
                section, up to this many tokens, in ``Hit.context`` (default: the
                configuration's ``[search] context_tokens``; 0 for the chunk alone).
                A hit inside a window already returned is merged into it.
        """
        if k < 1:
            raise ParameterError(f"k must be at least 1, not {k}")
        if mode not in SEARCH_MODES:
            raise ParameterError(f"unknown search mode {mode!r}: use vector, text or hybrid")
        if context_tokens is None:
            context_tokens = self.config.context_tokens
        if not context_tokens:
            return self._ranked(query, k, mode)
        results: list[Hit] = []
        for hit in self._ranked(query, 3 * k, mode):
            if any(r.source == hit.source and r.key == hit.key and r.first <= hit.index <= r.last
                   for r in results):
                continue
            window = self.store.window(hit, context_tokens)
            results.append(replace(hit, context=window.text, context_tokens=window.tokens,
                                   first=window.first, last=window.last))
            if len(results) == k:
                break
        return results

    def _ranked(self, query: str, k: int, mode: SearchMode) -> list[Hit]:
        query = normalize(query).text  # the same form as the indexed chunk texts
        if mode == "text":
            return self.store.search_text(query, k)
        vector = self.embedder.embed([query])[0]
        if mode == "vector":
            return self._nearest(vector, k)
        pool = max(k * 4, 20)
        ranked: dict[tuple[str, str, int], float] = {}
        hits: dict[tuple[str, str, int], Hit] = {}
        for results in (self._nearest(vector, pool),
                        self.store.search_text(query, pool)):
            for rank, hit in enumerate(results):
                key = (hit.source, hit.key, hit.index)
                ranked[key] = ranked.get(key, 0.0) + 1.0 / (_RRF_K + rank + 1)
                hits.setdefault(key, hit)
        best = sorted(ranked, key=lambda key: -ranked[key])[:k]
        return [replace(hits[key], score=ranked[key]) for key in best]

    def _nearest(self, vector: npt.NDArray[np.float32], k: int) -> list[Hit]:
        """Vector hits: from the external vector store when one is configured."""
        if self.sink is None:
            return self.store.search_vector(self.embedder.identity, vector, k)
        # A few spare hits cover points that are out of step with the records.
        found = [(h.payload, h.score) for h in self.sink.search(vector, k + 10)
                 if h.payload is not None]
        refs = [(p.source, p.key, p.index, p.digest) for p, _ in found]
        return self.store.hits_at(refs, [score for _, score in found])[:k]

    def documents(self) -> tuple[DocumentRef, ...]:
        """Every document in the store, by source and key."""
        return tuple(DocumentRef(source, key) for source in sorted(self.store.source_names())
                     for key in sorted(self.store.manifest(source)))

    def document(self, key: str, source: str | None = None) -> DocumentText:
        """The current (and previous) canonical text of a document.

        Raises ``KbsyncError`` when no document has that key (in ``source``, if given).
        """
        doc = self.store.document(key, source)
        if doc is None:
            raise KbsyncError(f"{key}: no such document in the knowledge base")
        return doc

    def diff(self, key: str, source: str | None = None) -> DocumentDiff:
        """The last change of a document: verdict, similarity and the changed regions."""
        doc = self.document(key, source)
        change = compare(doc.previous if doc.previous is not None else "", doc.text)
        return DocumentDiff(
            source=doc.source, key=doc.key, title=doc.title, last_changed=doc.last_changed,
            verdict=change.verdict, similarity=change.similarity,
            regions=tuple(ChangedRegion(r.offset, r.length, doc.text[r.offset:r.end])
                          for r in change.regions),
            text=doc.text, previous=doc.previous, change=change)

    def status(self) -> Status:
        """Counts of documents, chunks, embeddings and runs, and the last run."""
        st = self.store.status()
        last = st.last_run
        return Status(
            config=self.config.file, sources=tuple(s.name for s in self.config.sources),
            embedder=self.embedder.identity, documents=st.documents, chunks=st.chunks,
            embeddings=st.embeddings, runs=st.runs, by_source=dict(st.by_source),
            last_run=None if last is None else RunSummary(
                str(last["started"]), str(last["finished"]), dict(last["documents"])))

    def verify(self, *, repair: bool = False, wait: bool = True) -> Verification:
        """Recompute and check every invariant of the store (chunk identities included),
        then compare the external vector store, if any, with the records.

        With ``repair`` the vector store is made to match the records; the problems
        returned are those found before repairing.
        """
        identity = identity_for(self.config.chunker.strategy, **self.config.chunker.params)
        problems = self.store.verify(self.embedder.identity, identity)
        found = self.reconcile(repair=repair, wait=wait)
        return Verification(tuple(problems + (found.problems() if found is not None else [])))

    def reconcile(self, *, repair: bool = False, wait: bool = True) -> Reconciliation | None:
        """The differences between the records and the vector store (``None`` without one)."""
        if self.sink is None:
            return None
        if not repair:
            return reconcile(self.store, self.sink, self.embedder.identity,
                             self.embedder.dimension)
        with self._writing(wait, None):
            return reconcile(self.store, self.sink, self.embedder.identity,
                             self.embedder.dimension, repair=True)

    # -- maintenance ------------------------------------------------------------------

    def erase(self, pattern: str, *, wait: bool = True) -> Erased:
        """Remove documents whose key matches ``pattern`` (a key or a glob), with every
        row, text and vector derived from them, including mentions in run reports."""
        with self._writing(wait, None):
            if self.sink is not None:
                erase_vectors(self.store, self.sink, self.embedder.identity, pattern)
            return Erased(tuple(DocumentRef(s, k) for s, k in self.store.erase(pattern)))

    def gc(self, *, wait: bool = True) -> Collected:
        """Drop cache entries and texts nothing refers to, and compact the store."""
        with self._writing(wait, None):
            return Collected(self.store.gc())


def _sync_result(report: SyncReport) -> SyncResult:
    data = report_dict(report)  # the document totals, with every action present
    return SyncResult(
        dry_run=report.dry_run, started=report.started, finished=report.finished,
        documents=data["documents"], seconds=dict(report.seconds),
        diagnostics=report.diagnostics,
        sources=tuple(SourceResult(
            source=s.source, documents=Counter(s.documents), chunks=Counter(s.chunks),
            bytes_read=s.bytes_read, bytes_skipped=s.bytes_skipped,
            skipped_unsupported=s.skipped, embeddings_computed=s.embeddings_computed,
            embeddings_reused=s.embeddings_reused, embedding_tokens=s.embed_tokens,
            embeddings_truncated=s.embeddings_truncated,
            embeddings_backfill=s.embeddings_backfill, boilerplate_chunks=s.boilerplate,
            vectors_upserted=s.vectors_upserted, vectors_deleted=s.vectors_deleted,
            listing_complete=s.listing_complete, deletions_blocked=s.deletions_blocked,
            failures=tuple(s.failures), warnings=tuple(s.warnings),
            changes=tuple(DocumentChange(k, a, s.changes.get(k)) for k, a in s.actions),
        ) for s in report.sources))


def _change_dict(c: DocumentChange) -> dict[str, Any]:
    out: dict[str, Any] = {"key": c.key, "action": c.action}
    if c.change is not None:
        out |= {"verdict": str(c.change.verdict), "similarity": round(c.change.similarity, 4),
                "regions": [{"offset": r.offset, "length": r.length} for r in c.change.regions]}
    return out
