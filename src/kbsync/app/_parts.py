"""The knowledge base's parts: the components its configuration names, and what every verb
shares (the writer lock, the options of a sync, where its scratch files go).

:class:`~kbsync.app.knowledge_base.KnowledgeBase` is this and the verbs of
:mod:`._syncing`, :mod:`._reading` and :mod:`._maintenance`, one mixin each."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from kbsync.app.status import damage_said
from kbsync.core.costs import BillBound, bill_bound, rate_of
from kbsync.embed import Reranker
from kbsync.embed.kinds import embedder_kind
from kbsync.engine import (
    Config,
    check_fit,
    embedder_token_counter,
    make_embedder,
    make_sink,
    make_sources,
    open_store,
    store_exists,
    writer_lock,
)
from kbsync.errors import ConfigError, StoreError
from kbsync.extract import Extractor
from kbsync.extract.registry import extractor_for
from kbsync.store.guard import READ_ONLY
from kbsync.sync import (
    Progress,
    SyncOptions,
    remove_stale,
)
from kbsync.sync.vector_index import VectorIndex, index_for

__all__ = ["Parts"]


class Parts:
    """The components of a knowledge base and what its verbs share."""

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

    def close(self) -> None:
        """Close the store (and the vector store). The knowledge base cannot be used afterwards."""
        self.vector_index.close()
        self.store.close()

    @property
    def vector_index(self) -> VectorIndex:
        """Where the vectors are written and searched: the store's own, or mirrored into
        the external vector store (``[vectors]``) when one is configured."""
        return index_for(self.store, self.sink)

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
            self.config.store_kind.tidy(self.config.store.settings, self.config.root)
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
