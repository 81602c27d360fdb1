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

import contextlib
import fnmatch
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kbsync.app.mending import Mending, damage_said
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
from kbsync.app.searching import SEARCH_MODES, Searcher, SearchMode, SearchResults
from kbsync.app.watch import watch
from kbsync.core.compare import compare
from kbsync.core.costs import BillBound, EmbeddingCost, bill_bound, estimate, rate_of
from kbsync.embed import Reranker
from kbsync.embed.kinds import embedder_kind
from kbsync.engine import (
    Config,
    add_source,
    check_fit,
    embedder_token_counter,
    init_config,
    load_config,
    make_embedder,
    make_reranker,
    make_sink,
    make_sources,
    open_store,
    remove_source,
    store_exists,
    writer_lock,
)
from kbsync.errors import ConfigError, KbsyncError, ParameterError, StoreError
from kbsync.extract import Extractor
from kbsync.extract.registry import extractor_for
from kbsync.report import DocumentChange, SourceResult, SyncResult
from kbsync.sources.kinds import source_kind
from kbsync.store import DocumentText, RunRecord
from kbsync.store.filters import Filters, filters_from
from kbsync.store.guard import READ_ONLY
from kbsync.store.sqlite import (
    SqliteStore,
    carry_erasures,
    rebuild_file,
    remove_rebuild_leftovers,
    salvage_embeddings,
    swap_in,
)
from kbsync.sync import (
    Progress,
    SyncOptions,
    WorkQueue,
    drain,
    is_key_hash,
    release_source,
    remove_stale,
    sync_parallel,
    sync_sources,
    tombstone,
    utc_now,
)
from kbsync.sync.mirror import Reconciliation
from kbsync.sync.vector_index import VectorIndex, index_for

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

# A document's history is read from the run reports; this many of the latest runs are looked at.
HISTORY_RUNS = 200


class KnowledgeBase:
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

    def __init__(self, config: Config) -> None:
        """Build the components a configuration names (see :meth:`open`)."""
        self.config = config
        try:
            self.embedder = make_embedder(config.embedder)
            if config.chunker.counts_in_embedder_tokens:
                counter = embedder_token_counter(self.embedder)
                config = replace(config, chunker=replace(config.chunker, embedder_counter=counter))
                self.config = config
            check_fit(config.chunker, self.embedder, config.embedder)
        except ConfigError as exc:  # the table is in the file: say which file
            raise ConfigError(f"{config.file}: {exc}") from exc
        self._created = store_exists(config)
        self.store = open_store(config, create=False)
        self.sink = make_sink(config.vectors, config.root) if self._created else None
        self._progress: Progress | None = None
        self._reranker: Reranker | None = None
        self.sources = make_sources(config, self._crawled)
        folder = self._state_dir()
        if folder is not None:
            remove_stale(folder)  # scratch files of syncs that were killed

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

    # -- life cycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (and the vector store). The knowledge base cannot be used afterwards."""
        self.vector_index.close()
        self.store.close()

    @property
    def vector_index(self) -> VectorIndex:
        """Where the vectors are written and searched: the store's own, or mirrored into
        the external vector store (``[vectors]``) when one is configured."""
        return index_for(self.store, self.sink)

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

    @contextlib.contextmanager
    def _writing(self, wait: bool, on_wait: Callable[[str], None] | None, *,
                 mending: bool = False) -> Iterator[None]:
        """Within, the writer lock, with the store created first if it was not yet.

        A store known to be damaged takes no write but those that mend it (``mending``:
        a repair, a rebuild): writing into a damaged file can spread the damage, and
        what is written may be lost with it. Holding the lock, no rebuild runs, so what
        a killed one left is removed here.
        """
        if getattr(self.store, "read_only", False):
            raise StoreError(f"{self.config.store_location}: {READ_ONLY}")
        self._create_store()
        if not mending:
            self._refuse_if_damaged()
        with writer_lock(self.config, wait=wait, on_wait=on_wait):
            if self.config.store_kind.capabilities.rebuild:
                remove_rebuild_leftovers(Path(self.config.store_location))
            yield

    def _refuse_if_damaged(self) -> None:
        reason = self.store.known_damage()
        if reason is not None:
            raise StoreError(damage_said(self.config, reason, writing=True))

    @property
    def damage(self) -> str | None:
        """The one-line warning that the store is known to be damaged (a check failed, or
        the database said so during a command), or None: reads go on, writes wait for
        ``kbsync verify --repair`` or ``kbsync rebuild``."""
        reason = self.store.known_damage()
        return None if reason is None else damage_said(self.config, reason, writing=False)

    # -- syncing ----------------------------------------------------------------------

    def plan(self, *, progress: Progress | None = None) -> SyncResult:
        """What a sync would do (documents, chunks to embed, tokens), writing nothing.

        ``progress(stage, done, total)`` is called as the work advances.
        """
        self._progress = progress
        return sync_sources(
            self.sources, self.store, self.embedder, self._extractor_for, self.config.chunker,
            self._options(dry_run=True), progress=progress, index=self.vector_index)

    def sync(self, *, progress: Progress | None = None, verify: bool = False,
             allow_mass_delete: bool = False, wait: bool = True,
             on_wait: Callable[[str], None] | None = None, workers: int = 0,
             accept_replacements: bool = False, yes: bool = False,
             due: bool = False, sources: Sequence[str] | None = None,
             accept_root: bool = False) -> SyncResult:
        """Bring the store in step with the sources, doing the least work that is correct.

        Args:
            progress: called as ``progress(stage, done, total)`` while the work advances.
            verify: read every file even when its size and time are unchanged.
            allow_mass_delete: allow deleting more than half of a source's documents.
            wait: wait for another writer; when false a held lock raises ``LockedError``.
            on_wait: told once, with a message, when the sync has to wait for the lock.
            workers: share the documents among this many processes (this one and
                ``workers - 1`` started here) and any ``kbsync worker`` serving the same
                store, through its work queue (PostgreSQL only; see :mod:`kbsync.sync.parallel`).
            accept_replacements: apply a new text that shares almost nothing with the
                stored one at once, instead of keeping the stored version until the
                next sync confirms it (a login wall or an error page would replace it).
            yes: embed however much there is; otherwise a source whose embedding costs
                more than the bound of its embedder (:meth:`bill_bound`) raises
                :class:`~kbsync.errors.ConfirmationRequiredError` before any of it is
                embedded.
            due: check only the web pages whose revisit schedule says they are due
                (``min_interval``/``max_interval`` of the source); the others count as
                unchanged, never as gone. Folders are synced as always.
            sources: sync only the sources of these names (every one when None); the
                others are left as they are. A name not configured is a ``ConfigError``.
            accept_root: take a folder whose root is on another device than at the last
                sync as moved there on purpose; otherwise, when it lacks documents, its
                listing counts as incomplete (an unmounted disk looks like an emptied
                folder) and nothing of it is deleted.
        """
        if workers and not self.config.store_kind.capabilities.workers:
            raise ConfigError("--workers needs a PostgreSQL store ([store] url in kbsync.toml): "
                              "a SQLite file takes one writer at a time")
        if workers and due:
            raise ConfigError("--due does not drive parallel workers yet: sync --due without "
                              "--workers")
        if workers and self.config.vectors:
            raise ConfigError("--workers does not drive an external vector store ([vectors]) "
                              "yet: sync without --workers")
        only = None if sources is None else self._named(sources)
        self._progress = progress
        with self._writing(wait, on_wait):
            if verify:
                self._check_file()
            options = self._options(verify=verify, allow_mass_delete=allow_mass_delete,
                                    accept_replacements=accept_replacements, due=due,
                                    accept_root=accept_root)
            options = replace(options, only=only)
            if workers:
                return sync_parallel(
                    self.sources, self._queue(), self.embedder, self._extractor_for,
                    self.config.chunker, options, workers=workers, spawn=self._spawn,
                    progress=progress)
            bound = None if yes else self.bill_bound()
            options = replace(options,
                              confirm_above_tokens=None if bound is None else bound.tokens,
                              bound_setting="" if bound is None else bound.setting)
            if isinstance(self.store, WorkQueue):
                # Holding the writer lock, no parallel run is in progress: a queue left by a
                # killed one would be served, out of date, by a `kbsync worker` started later.
                self.store.abandon_runs()
            return sync_sources(
                self.sources, self.store, self.embedder, self._extractor_for, self.config.chunker,
                options, progress=progress, index=self.vector_index)

    def _check_file(self) -> None:
        """Before a full revalidation writes, SQLite's quick_check of every page: too dear
        for every sync (see docs/reliability.md), cheap beside reading every document."""
        if isinstance(self.store, SqliteStore) and self.store.quick_check() is not None:
            self._refuse_if_damaged()

    def _confirm_above(self) -> int | None:
        """``[index] confirm_above_tokens``; 0 turns the question off."""
        return self.config.index.confirm_above_tokens or None
    def _named(self, names: Sequence[str]) -> frozenset[str]:
        """The configured sources ``names`` names; ConfigError naming one that is not."""
        configured = [s.name for s in self.config.sources]
        unknown = [n for n in names if n not in configured]
        if unknown:
            raise ConfigError(f"{self.config.file}: no source named {unknown[0]!r} "
                              f"(sources: {', '.join(configured) or 'none'})")
        return frozenset(names)

    def bill_bound(self) -> BillBound | None:
        """Above what a sync asks before embedding, after what embedding costs with this
        embedder: ``[index] confirm_above_tokens`` for a priced service, ``[index]
        confirm_above_seconds`` at the measured rate for a local model, never for the
        hashing embedder (None)."""
        embedder = self.config.embedder
        rate, _ = rate_of(self.embedder.identity, embedder.kind,
                          (r.report for r in self.store.runs(20)))
        return bill_bound(embedder_kind(embedder.kind).bill,
                          confirm_above_tokens=self.config.index.confirm_above_tokens,
                          confirm_above_seconds=self.config.index.confirm_above_seconds,
                          tokens_per_second=rate)

    def estimate(self, plan: SyncResult) -> EmbeddingCost:
        """The embedding bill of a plan (:meth:`plan`): chunks and tokens to embed, the
        time at the rate measured over the last syncs (or a default), the price when
        ``[embedder] price_per_million_tokens`` is set."""
        price = self.config.embedder.price_per_million_tokens
        return estimate(
            sum(s.embeddings_to_compute for s in plan.sources),
            sum(s.embedding_tokens for s in plan.sources),
            embedder=self.embedder.identity, kind=self.config.embedder.kind,
            reports=(r.report for r in self.store.runs(20)),
            price_per_million_tokens=None if price is None else float(price),
            bound=self.bill_bound())

    def work(self, *, run: str | None = None, follow: bool = False, poll: float = 2.0,
             stop: threading.Event | None = None) -> int:
        """Serve parallel syncs of this knowledge base as a worker; the documents processed.

        Processes the queued documents of ``run`` (or of every run in progress) until
        none is left unclaimed; with ``follow``, keeps looking for new runs every
        ``poll`` seconds until ``stop`` is set. Needs the same ``kbsync.toml`` (and
        source folders at the same paths) as the process that started the sync.
        """
        self._create_store()
        self._refuse_if_damaged()
        queue = self._queue()
        stop = stop or threading.Event()
        done = 0
        while not stop.is_set():
            for current in [run] if run else queue.open_runs():
                done += drain(current, self.sources, queue, self.embedder, self._extractor_for,
                              self.config.chunker)
            if not follow:
                break
            stop.wait(poll)
        return done

    def _queue(self) -> WorkQueue:
        if not isinstance(self.store, WorkQueue):
            raise ConfigError("parallel workers need a PostgreSQL store ([store] url in "
                              "kbsync.toml)")
        return self.store

    def _spawn(self, run: str, count: int) -> Callable[[], list[int]]:
        """Start ``count`` worker processes for ``run``; the result waits for their exit codes."""
        command = [sys.executable, "-m", "kbsync", "worker", "--run", run, "--quiet",
                   "-c", str(self.config.file)]
        processes = [subprocess.Popen(command, stdin=subprocess.DEVNULL) for _ in range(count)]
        return lambda: [p.wait() for p in processes]

    def _state_dir(self) -> Path | None:
        """The state directory, where a sync keeps its scratch file (if there is one).

        Keeping them there rather than in the system's temporary directory keeps
        every file a sync opens inside a source root or the state directory.
        """
        folder = self.config.state_dir
        if getattr(self.store, "read_only", False):
            return None  # a plan of a read-only store writes its scratch file elsewhere
        return folder if folder.is_dir() else None

    def _extractor_for(self, media_type: str) -> Extractor | None:
        """The extractor of a media type, strict about decoding if ``[index]`` says so."""
        return extractor_for(media_type, strict_decoding=self.config.index.strict_decoding)

    def _options(self, **given: Any) -> SyncOptions:
        """How a sync runs: ``given``, and the ``[index]`` table's boilerplate settings."""
        index = self.config.index
        return SyncOptions(boilerplate_share=index.boilerplate_share,
                           index_boilerplate=index.index_boilerplate,
                           read_workers=index.read_workers, scratch_dir=self._state_dir(),
                           **given)

    def watch(self, *, interval: float = 86_400.0, full_every: float = 30 * 86_400.0,
              stop: threading.Event | None = None,
              on_report: Callable[[SyncResult, str], None] | None = None,
              yes: bool = False) -> None:
        """Sync on file events and every ``interval`` seconds, with a full revalidation
        (``verify``) every ``full_every``, until ``stop`` is set. Between full
        revalidations only the web pages that are due are checked (``sync(due=True)``).

        ``on_report(result, reason)`` receives each run's result and why it ran;
        ``yes`` is :meth:`sync`'s (without it, a bill over the bound stops the watch).
        """
        watched = (source_kind(s.kind).watched_folder(s, self.config.root)
                   for s in self.config.sources)
        folders = [folder for folder in watched if folder is not None]
        # Created before the folders are watched: its creation is no change of a source.
        self._create_store()
        watch(lambda verify: self.sync(verify=verify, yes=yes, due=not verify), folders,
              interval=interval,
              full_every=full_every, stop=stop, on_report=on_report,
              ignore=[self.config.state_dir])

    # -- reading ----------------------------------------------------------------------

    def search(self, query: str, k: int = 5, mode: SearchMode | None = None,
               context_tokens: int | None = None,
               query_vector: npt.NDArray[np.float32] | None = None,
               filters: Filters | Mapping[str, Any] | None = None,
               rerank: bool | None = None) -> SearchResults:
        """The chunks of the current documents that best match ``query``, best first,
        each with its ``rank`` (from 1) and ``relevance`` in [0, 1] (see :mod:`kbsync.app.fusion`).

        The results are a list of :class:`Hit`, with ``warnings``: a line that says, once,
        that chunks whose vector is damaged were left out (never ranked), or else that the
        store is known to be damaged.

        Args:
            query: what to look for, in words.
            k: how many results.
            mode: ``"vector"`` (embedding similarity), ``"text"`` (full text) or
                ``"hybrid"`` (both, fused by reciprocal rank); by default the
                configuration's (:attr:`~kbsync.engine.Config.default_search_mode`).
            context_tokens: return each hit with its neighbouring chunks of the same
                section, up to this many tokens, in ``Hit.context`` (default: the
                configuration's ``[search] context_tokens``; 0 for the chunk alone).
                A hit inside a window already returned is merged into it, and a
                window does not grow into one already returned (no text twice).
            query_vector: the query's vector, when the caller has it from this
                knowledge base's embedder (a running ``kbsync serve`` that holds the
                model loaded); by default the embedder embeds the query.
            filters: only chunks of documents meeting these: name -> value, a list
                of values any one of which may match, or {operator: value} (``source``,
                ``path`` and ``title`` are the store's fields, other names keys of the
                document's metadata; see :mod:`kbsync.store.filters`).
            rerank: read the best ``[search] rerank_candidates`` hits again with the
                cross-encoder ``[search] rerank_model`` (default: ``[search] rerank``).
        """
        if context_tokens is None:
            context_tokens = self.config.search.context_tokens
        known = self.damage
        results = self._searcher(rerank).search(query, k,
                                                mode or self.config.default_search_mode,
                                                context_tokens, query_vector,
                                                filters_from(filters))
        if results.unsound and known is None:
            # Found damage is known damage: the next write waits for a repair.
            self.store.remember_damage(f"a search found {results.unsound:,} chunks with a "
                                       "damaged vector")
        # One line: what this search left out says the most; else what is known.
        return SearchResults(results, results.warnings or ([known] if known else []),
                             results.unsound)

    def query_vector(self, query: str) -> npt.NDArray[np.float32]:
        """The vector a search compares chunks with: the embedder's vector of the
        normalized query."""
        return self._searcher().query_vector(query)

    def _searcher(self, rerank: bool | None = None) -> Searcher:
        reranker = None
        if self.config.search.rerank if rerank is None else rerank:
            if self._reranker is None:  # made once, by the first search that reranks
                self._reranker = make_reranker(self.config)
            reranker = self._reranker
        return Searcher(self.store, self.vector_index, self.embedder, reranker,
                        self.config.search.rerank_candidates)

    def documents(self, *, after: DocumentRef | None = None,
                  limit: int | None = None) -> tuple[DocumentRef, ...]:
        """The documents in the store, ordered by source and key (in the store's collation).

        ``after`` and ``limit`` page through a large store: the next page starts
        after the last document of the previous one, so documents added or removed
        in between neither repeat nor shift the rest; a page reads only its own rows.
        """
        if limit is not None and limit < 1:
            raise ParameterError(f"limit must be at least 1, not {limit}")
        found: list[DocumentRef] = []
        for source in sorted(self.store.source_names()):
            if after is not None and source < after.source:
                continue  # its manifest need not be read
            start = after.key if after is not None and source == after.source else None
            wanted = None if limit is None else limit - len(found)
            found.extend(DocumentRef(source, key)
                         for key in self.store.manifest(source, start, wanted))
            if len(found) == limit:
                break
        return tuple(found)

    def document(self, key: str, source: str | None = None) -> DocumentText:
        """The current (and previous) canonical text of a document.

        Raises ``KbsyncError`` when no document has that key (in ``source``, if given),
        and ``ParameterError`` when several sources hold it and no ``source`` is given.
        """
        names = self.store.source_names() if source is None else set()
        if len(names) > 1:  # read from each source once, not looked up and then read
            found = [d for s in sorted(names) if (d := self.store.document(key, s)) is not None]
            if len(found) > 1:
                raise ParameterError(f"{key}: several sources hold this key "
                                     f"({', '.join(d.source for d in found)}): name one "
                                     "(--source)")
            doc = found[0] if found else None
        else:
            doc = self.store.document(key, source)
        if doc is None:
            last = self.history(key, source, limit=1)
            if last and last[0].action == "deleted":
                raise KbsyncError(f"{key}: deleted by sync #{last[0].run} (finished "
                                  f"{last[0].finished}); its text is no longer stored")
            raise KbsyncError(f"{key}: no such document in the knowledge base")
        return doc

    def diff(self, key: str, source: str | None = None) -> DocumentDiff:
        """The last change of a document: verdict, kind and reason, similarity and the changed
        regions.

        A document with one version only comes back with ``first_version`` true; one
        that was renamed names the key it had before its last move (``moved_from``).
        """
        doc = self.document(key, source)
        if doc.previous is None:
            return DocumentDiff(
                source=doc.source, key=doc.key, title=doc.title, last_changed=doc.last_changed,
                verdict=None, similarity=None, regions=(), text=doc.text, previous=None,
                change=None, moved_from=doc.moved_from, moved=doc.moved)
        change = compare(doc.previous, doc.text)
        return DocumentDiff(
            source=doc.source, key=doc.key, title=doc.title, last_changed=doc.last_changed,
            verdict=change.verdict, similarity=change.similarity, kind=change.kind,
            reason=change.reason,
            regions=tuple(ChangedRegion(r.offset, r.length, doc.text[r.offset:r.end])
                          for r in change.regions),
            text=doc.text, previous=doc.previous, change=change,
            removed=tuple(ChangedRegion(r.offset, r.length, doc.previous[r.offset:r.end])
                          for r in change.removed_regions),
            moved_from=doc.moved_from, moved=doc.moved)

    def status(self) -> Status:
        """Counts of documents, chunks, embeddings and runs, the last run, and the process
        writing now (a sync in progress), if any."""
        st = self.store.status()
        last = None if st.last_run is None else SyncResult.from_dict(st.last_run)
        return Status(
            config=self.config.file, sources=tuple(s.name for s in self.config.sources),
            embedder=self.embedder.identity, documents=st.documents, chunks=st.chunks,
            embeddings=st.embeddings, runs=st.runs, by_source=dict(st.by_source),
            last_run=None if last is None else RunSummary(
                last.started, last.finished, dict(last.documents), interrupted=last.interrupted,
                applied=sum(s.documents_applied for s in last.sources),
                failures=tuple((s.source, key, message) for s in last.sources
                               for key, message in s.failures),
                unlisted=tuple(s.source for s in last.sources if not s.listing_complete)),
            writer=writer_lock(self.config, wait=False).holder(), damage=self.damage)

    def runs(self, limit: int = 50) -> list[RunRecord]:
        """The latest recorded syncs, newest first, each with its report
        (the shape of :meth:`SyncResult.to_dict`)."""
        return self.store.runs(limit)

    def run(self, run_id: int) -> RunRecord | None:
        """One recorded sync, or None when there is no such run."""
        return self.store.run(run_id)

    def history(self, key: str, source: str | None = None,
                limit: int = 20) -> list[HistoryEntry]:
        """The changes to a document recorded by the latest ``HISTORY_RUNS`` runs,
        newest first, at most ``limit``."""
        found: list[HistoryEntry] = []
        for record in self.store.runs(HISTORY_RUNS):
            for s in SyncResult.from_dict(record.report).sources:
                if source is not None and s.source != source:
                    continue
                for change in s.changes:
                    if change.key != key:
                        continue
                    edit = change.change
                    found.append(HistoryEntry(
                        run=record.id, finished=record.finished, source=s.source,
                        action=change.action, verdict=None if edit is None else str(edit.verdict),
                        similarity=None if edit is None else round(edit.similarity, 4),
                        regions=0 if edit is None else len(edit.regions),
                        kind=None if edit is None or edit.kind is None else str(edit.kind),
                        reason="" if edit is None else edit.reason))
                    if len(found) == limit:
                        return found
        return found

    def verify(self, *, repair: bool = False, wait: bool = True) -> Verification:
        """Check the store file (SQLite's integrity and full-text checks; PostgreSQL's
        amcheck), recompute and check every invariant of the store (chunk identities
        included), then compare the external vector store, if any, with the records.

        Stored values are checked against what they commit to: chunk texts against their
        digests, kept texts against their checksums, vectors finite and of the embedder's
        norm (see :mod:`kbsync.store.values`). Damage found is remembered: writes wait
        until a repair or a rebuild mends it, and reads warn.

        With ``repair`` (under the writer lock) damaged values are discarded and made
        again (vectors embedded, chunk texts cut again from their document's text, a
        damaged current text read again from its source by a sync; a damaged previous
        text is lost), a SQLite store rebuilds what it holds twice (indexes, the
        full-text index, chunk texts), chunks without a vector are embedded, the vector
        store is made to match the records, and both are checked again: ``problems``
        are those found before repairing, ``remaining`` those the repair could not fix
        (damage to the tables themselves needs :meth:`rebuild`; other problems of the
        store, a sync or an erasure).
        """
        mending = self._mending()
        found = mending.check()
        repaired: tuple[str, ...] = ()
        after = found
        if repair and found:
            with self._writing(wait, None, mending=True):
                repaired = mending.repair()
            after = mending.check()

        def in_mirror(repair: bool) -> tuple[str, ...]:
            found = self.reconcile(repair=repair, wait=wait)
            return () if found is None else tuple(found.problems())

        problems = found + in_mirror(repair)
        return Verification(problems, after + in_mirror(False) if repair else problems,
                            repaired)

    def _mending(self) -> Mending:
        """What checks and mends the store (:mod:`kbsync.app.mending`); its sync reads the
        sources as :meth:`sync` does."""
        bound = self.bill_bound()

        def sync() -> SyncResult:
            return sync_sources(
                self.sources, self.store, self.embedder, self._extractor_for,
                self.config.chunker,
                self._options(confirm_above_tokens=None if bound is None else bound.tokens),
                index=self.vector_index)

        return Mending(self.store, self.embedder, self.config.chunker, self._extractor_for, sync,
                       bound)

    def rebuild(self, *, progress: Progress | None = None, wait: bool = True) -> Rebuilt:
        """Build a fresh store from the sources and put it in place of the current one.

        For a store that is damaged beyond what ``verify(repair=True)`` mends. Every
        readable vector of the embedding cache is copied over first, so the sync
        into the fresh store embeds only what the cache lacks, and so is every
        erasure, so that no erased document comes back. The new file replaces
        the old in one rename once the sync has listed every source; until then the
        old store is untouched, and afterwards it is kept beside it
        (``<store>.before-rebuild``), since a document that could not be read now
        (see the result's failures) is in the old store only. SQLite stores only.
        """
        if not self.config.store_kind.capabilities.rebuild:
            raise StoreError("kbsync rebuild makes a fresh SQLite store; a PostgreSQL store "
                             "is repaired with the database's own tools (REINDEX, a restore)")
        live = Path(self.config.store_location)
        fresh = rebuild_file(live)
        backup = live.with_name(live.name + ".before-rebuild")
        self._progress = progress
        with self._writing(wait, None, mending=True):  # which removes what a killed rebuild left
            new = SqliteStore(fresh)
            old = self.store
            try:
                carry_erasures(live, new)
                salvaged = salvage_embeddings(live, new)
                self.store = new
                result = sync_sources(
                    self.sources, new, self.embedder, extractor_for, self.config.chunker,
                    self._options(allow_mass_delete=True), progress=progress,
                    index=self.vector_index)
                if not all(s.listing_complete for s in result.sources):
                    raise StoreError(f"{live}: a source could not be listed in full, so the "
                                     "rebuilt store would miss documents; the old store is "
                                     "left as it was")
            except BaseException:
                self.store = old
                new.close()
                fresh.unlink(missing_ok=True)
                raise
            new.close()
            old.close()
            swap_in(fresh, live, backup)
            self.store = SqliteStore(live)
            self.store.remember_damage(None)  # the damage was the old file's
        reused = sum(s.embeddings_reused for s in result.sources)
        return Rebuilt(result, salvaged, reused, backup)

    def reconcile(self, *, repair: bool = False, wait: bool = True) -> Reconciliation | None:
        """The differences between the records and the vector store (``None`` without one)."""
        index = self.vector_index
        if not index.mirrored:  # nothing to compare: no lock to take, no store to create
            return None
        identity, dimension = self.embedder.identity, self.embedder.dimension
        if not repair:
            return index.reconcile(identity, dimension)
        # It mends the vector store from the records (the store's own writes are its outbox).
        with self._writing(wait, None, mending=True):
            return index.reconcile(identity, dimension, repair=True)

    # -- maintenance ------------------------------------------------------------------

    def erase(self, pattern: str, *, wait: bool = True) -> Erased:
        """Remove documents whose key matches ``pattern`` (a key or a glob), with every
        row, text and vector derived from them, including mentions in run reports.

        The erasure is remembered (a tombstone, recorded first so an interrupted erase
        still holds): later syncs skip the keys it covers, in every source, so they do
        not come back; :meth:`unerase` forgets it.
        """
        if not pattern:
            raise ParameterError("the pattern to erase must not be empty")
        with self._writing(wait, None):
            # A pattern that matches nothing is most likely a typo: remembering it would
            # quietly keep a document out of every later sync. A pattern already
            # remembered goes on (the rerun of an interrupted erase finishes its work).
            remembered = tombstone(pattern) in {p for p, _ in self.store.erasures()}
            if not remembered and not self._any_key_matches(pattern):
                raise ParameterError(
                    f"no document matches {pattern!r}; nothing was erased or remembered "
                    "(keys are paths relative to the source's folder, or URLs, as "
                    "`kbsync search` shows them)")
            self.store.add_erasure(tombstone(pattern), utc_now())
            self.vector_index.erase(self.embedder.identity, pattern)
            return Erased(tuple(DocumentRef(s, k) for s, k in self.store.erase(pattern)))

    def _any_key_matches(self, pattern: str) -> bool:
        """Whether a stored document's key matches ``pattern`` as :meth:`erase` reads it."""
        for source in self.store.source_names():
            after: str | None = None
            while page := self.store.manifest(source, after=after, limit=1000):
                if any(fnmatch.fnmatchcase(key, pattern) for key in page):
                    return True
                after = next(reversed(page))  # the manifest pages in key order
        return False

    def add_source(self, argument: str, name: str | None = None, *,
                   endpoint_url: str | None = None) -> None:
        """Add a source to ``kbsync.toml``: a folder, a URL, or what another kind claims
        (see :mod:`kbsync.sources.kinds`); the next sync indexes it. ``endpoint_url`` is
        the server of an object store other than AWS (an S3-compatible one)."""
        self.config = add_source(self.config, argument, name, endpoint_url=endpoint_url)
        self.sources = make_sources(self.config, self._crawled)

    def remove_source(self, name: str, *, wait: bool = True) -> None:
        """Remove the source ``name`` from ``kbsync.toml``; the next sync deletes its documents.

        A source that only vanished from the configuration (a typo, a mangled file) keeps
        its documents: this is how to say it is meant, also for a source that is no
        longer configured but still has documents in the store.
        """
        configured = any(s.name == name for s in self.config.sources)
        if not configured and name not in self.store.source_names():
            raise ConfigError(f"no source named {name!r}")
        if name in self.store.source_names():
            with self._writing(wait, None):
                release_source(self.store, name)
        if configured:
            self.config = remove_source(self.config, name)
            self.sources = make_sources(self.config, self._crawled)

    def erasures(self) -> tuple[Erasure, ...]:
        """The erasures the store remembers, in the order of what it keeps of them."""
        return tuple(Erasure(p, created, is_key_hash(p)) for p, created in self.store.erasures())

    def unerase(self, pattern: str, *, wait: bool = True) -> Erasure:
        """Forget an erasure, so the next sync indexes the documents it covered again.

        ``pattern`` is what :meth:`erase` was given (or, for an exact key, the
        ``pattern`` that :meth:`erasures` shows for it). Returns the erasure forgotten;
        raises ``KbsyncError`` when there is none.
        """
        wanted = {pattern, tombstone(pattern)}
        found = [e for e in self.erasures() if e.pattern in wanted]
        if not found:
            raise KbsyncError(f"{pattern}: no such erasure (`kbsync erase --list` shows them)")
        with self._writing(wait, None):
            self.store.remove_erasure(found[0].pattern)
        return found[0]

    def gc(self, *, wait: bool = True) -> Collected:
        """Drop cache entries and texts nothing refers to, and compact the store."""
        with self._writing(wait, None):
            return Collected(self.store.gc())

