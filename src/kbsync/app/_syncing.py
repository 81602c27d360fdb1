"""Syncing: the verbs that bring the store in step with the sources (plan, sync, work,
watch)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from kbsync.app._parts import Parts
from kbsync.app.watch import watch
from kbsync.core.costs import EmbeddingCost, estimate
from kbsync.engine.recipe import ConfigRecipe
from kbsync.errors import ConfigError
from kbsync.report import SyncResult
from kbsync.sources.kinds import source_kind
from kbsync.sync import (
    Progress,
    RayCluster,
    WorkQueue,
    drain,
    sync_parallel,
    sync_ray,
    sync_sources,
    worker_context,
)

__all__ = ["Syncing"]


class Syncing(Parts):
    """The verbs that sync (a mixin of :class:`~kbsync.app.knowledge_base.KnowledgeBase`)."""

    def plan(self, *, progress: Progress | None = None,
             sources: Sequence[str] | None = None) -> SyncResult:
        """What a sync would do (documents, chunks to embed, tokens), writing nothing.

        ``progress(stage, done, total)`` is called as the work advances; ``sources``
        plans only the sources of these names, as :meth:`sync` syncs them.
        """
        only = None if sources is None else self._named(sources)
        self._progress = progress
        return sync_sources(
            self.sources, self.store, self.embedder, self._extractor_for, self.config.chunker,
            replace(self._options(dry_run=True), only=only), progress=progress,
            index=self.vector_index)

    def sync(self, *, progress: Progress | None = None, verify: bool = False,
             allow_mass_delete: bool = False, wait: bool = True,
             on_wait: Callable[[str], None] | None = None, workers: int = 0,
             accept_replacements: bool = False, yes: bool = False,
             due: bool = False, sources: Sequence[str] | None = None,
             accept_root: bool = False, ray: RayCluster | None = None) -> SyncResult:
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
        if ray is not None and workers:
            raise ConfigError("a sync on Ray takes its CPUs from the cluster (RayCluster.cpus), "
                              "not worker processes of its own")
        if ray is not None and self.config.vectors:
            raise ConfigError("--engine ray does not drive an external vector store ([vectors]) "
                              "yet: sync without it")
        if workers and not self.config.store_kind.capabilities.workers:
            raise ConfigError("--workers needs a PostgreSQL store ([store] url in kbsync.toml): "
                              "a SQLite file takes one writer at a time")
        only = None if sources is None else self._named(sources)
        self._progress = progress
        with self._writing(wait, on_wait):
            if verify:
                self._check_file()
            options = self._options(verify=verify, allow_mass_delete=allow_mass_delete,
                                    accept_replacements=accept_replacements, due=due,
                                    accept_root=accept_root)
            bound = None if yes else self.bill_bound()
            options = replace(options, only=only,
                              confirm_above_tokens=None if bound is None else bound.tokens,
                              bound_setting="" if bound is None else bound.setting)
            if workers:
                return sync_parallel(
                    self.sources, self._queue(), self.embedder, self._extractor_for,
                    self.config.chunker, options, workers=workers, spawn=self._spawn,
                    progress=progress, index=self.vector_index)
            if isinstance(self.store, WorkQueue):
                # Holding the writer lock, no parallel run is in progress: a queue left by a
                # killed one would be served, out of date, by a `kbsync worker` started later.
                self.store.abandon_runs()
            if ray is not None:
                return sync_ray(self.sources, self.store, self.embedder, self._extractor_for,
                                self.config.chunker, options, recipe=ConfigRecipe(self.config),
                                cluster=ray, progress=progress)
            return sync_sources(
                self.sources, self.store, self.embedder, self._extractor_for, self.config.chunker,
                options, progress=progress, index=self.vector_index)

    def _check_file(self) -> None:
        """Before a full revalidation writes, SQLite's quick_check of every page: too dear
        for every sync (see docs/reliability.md), cheap beside reading every document."""
        if self.store.check_pages() is not None:
            self._refuse_if_damaged()

    def _named(self, names: Sequence[str]) -> frozenset[str]:
        """The configured sources ``names`` names; ConfigError naming one that is not."""
        configured = [s.name for s in self.config.sources]
        unknown = [n for n in names if n not in configured]
        if unknown:
            raise ConfigError(f"{self.config.file}: no source named {unknown[0]!r} "
                              f"(sources: {', '.join(configured) or 'none'})")
        return frozenset(names)

    def estimate(self, plan: SyncResult) -> EmbeddingCost:
        """The embedding bill of a plan (:meth:`plan`): chunks and tokens to embed, the
        time at the rate measured over the last syncs (or a default), the price when
        ``[embedder] price_per_million_tokens`` is set; and how long its sync takes, a
        range (``sync``: reading as the plan did, embedding and writing at the rates of
        the last syncs)."""
        price = self.config.embedder.price_per_million_tokens
        return estimate(
            sum(s.embeddings_to_compute for s in plan.sources),
            sum(s.embedding_tokens for s in plan.sources),
            embedder=self.embedder.identity, kind=self.config.embedder.kind,
            reports=(r.report for r in self.store.runs(20)),
            price_per_million_tokens=None if price is None else float(price),
            bound=self.bill_bound(), plan_seconds=plan.seconds,
            written=sum(s.chunks.get("added", 0) + s.chunks.get("deleted", 0)
                        for s in plan.sources))

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
        ctx = worker_context(queue, self.embedder, self._extractor_for, self.config.chunker,
                             self._options(), self.vector_index)
        done = 0
        while not stop.is_set():
            for current in [run] if run else queue.open_runs():
                done += drain(current, self.sources, ctx)
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
