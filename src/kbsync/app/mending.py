"""Checking a knowledge base's store and mending it: what ``kbsync verify [--repair]`` does
to the store, and what is said of a store known to be damaged.

A check reads every invariant and every stored value (:meth:`~kbsync.store.Maintenance.verify`). A
repair makes again what the store can make again, in an order where each step can read
what it needs: the file first (no value can be read through a damaged index), then the
damaged values are discarded, then what their discarding left is made again (chunk
texts cut from their document's text, texts read from their sources by a sync, vectors
embedded).

:class:`~kbsync.app.knowledge_base.KnowledgeBase` holds the writer lock around a repair and
compares the external vector store; this module knows neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kbsync.core.costs import BillBound
from kbsync.embed import Embedder, norm_of
from kbsync.errors import KbsyncError, StoreError
from kbsync.extract.registry import SUPPORTED_MEDIA_TYPES
from kbsync.report import SyncResult
from kbsync.store import Discarded, EmbeddingCache, Maintenance, Manifest, Meta
from kbsync.sync import Chunker, SourceTally, backfill
from kbsync.sync.embedding import embedded_meta_name
from kbsync.sync.observe import ExtractorFor, derivation

__all__ = ["Mended", "Mending"]


class Mended(Maintenance, Manifest, Meta, EmbeddingCache, Protocol):
    """What checking and mending a store uses: its checks, its manifest's sources, meta
    (which sources are fully embedded) and the embedding cache (what lost its vector)."""


@dataclass(frozen=True)
class Mending:
    """What checking and mending one store needs: the store, the embedder whose vectors it
    must hold, the chunker and extractors whose digests and derivations it holds, a sync
    of the sources (to read a damaged text again) and the bound on what a repair embeds
    without asking (:meth:`~kbsync.app.knowledge_base.KnowledgeBase.bill_bound`)."""

    store: Mended
    embedder: Embedder
    chunker: Chunker
    extractor_for: ExtractorFor
    sync: Callable[[], SyncResult]
    bound: BillBound | None

    def check(self) -> tuple[str, ...]:
        """Every invariant and stored value checked; the problems found."""
        # Documents made with other settings are chunked again by the next sync: their
        # chunks' digests are not checked against the current chunker.
        current = {derivation(self.chunker, e.identity) for e in
                   (self.extractor_for(t) for t in SUPPORTED_MEDIA_TYPES) if e is not None}
        return tuple(self.store.verify(self.embedder.identity,
                                       self.chunker.text_chunker().identity, current,
                                       norm_of(self.embedder)))

    def repair(self) -> tuple[str, ...]:
        """Make again what the store can make again; what was done, one line per step.

        The caller holds the writer lock.
        """
        chunker = self.chunker.text_chunker()

        def rechunk(text: str) -> dict[str, str]:
            return {c.identity: c.text for c in chunker.chunk(text).chunks}

        current = {derivation(self.chunker, e.identity) for e in
                   (self.extractor_for(t) for t in SUPPORTED_MEDIA_TYPES) if e is not None}
        cached = self._cached()
        done = self._repair_file(rechunk)
        try:
            discarded = self.store.discard_damaged(self.embedder.identity, chunker.identity,
                                                   current, norm_of(self.embedder))
        except StoreError as exc:
            discarded = Discarded()
            done += (f"could not check the stored values: {exc}",)
        done += tuple(discarded.lines())
        # Vectors may have gone (discarded, or on a damaged page): no sync may trust that
        # every chunk of a source has one until it has looked again.
        for source in self.store.source_names():
            self.store.set_meta(embedded_meta_name(source), "")
        if discarded.chunk_texts:
            done += self._repair_file(rechunk)
        if discarded.current:
            done += self._read_again(discarded.current)
        return done + self._embed_missing() + self._cache_loss(cached)

    def _cached(self) -> int | None:
        """How many vectors the embedding cache holds; None where the store cannot say."""
        try:
            return self.store.status().embeddings
        except StoreError:  # the store's driver errors, damage included, reach us as these
            return None

    def _cache_loss(self, before: int | None) -> tuple[str, ...]:
        """What the repair took from the embedding cache for good, said: a damaged or
        unreadable vector is embedded again only for a current chunk, so those of chunks
        no current document holds (earlier versions, another embedder) are gone."""
        after = self._cached()
        if before is None or after is None or after >= before:
            return ()
        return (f"the embedding cache holds {before - after:,} vectors fewer ({before:,} -> "
                f"{after:,}): damaged or unreadable vectors of chunks no current document "
                "holds, not embedded again (a sync embeds a text again if it comes back)",)

    def _repair_file(self, rechunk: Callable[[str], Mapping[str, str]]) -> tuple[str, ...]:
        """Rebuild what the store holds twice (SQLite: indexes, full text, chunk texts, a
        damaged embedding cache's readable vectors; PostgreSQL: chunk texts)."""
        return tuple(self.store.repair(rechunk))

    def _read_again(self, documents: int) -> tuple[str, ...]:
        """Sync, so that the documents whose damaged text was discarded are read from their
        sources again (their gates were told they are unknown)."""
        try:
            result = self.sync()
        except KbsyncError as exc:
            return (f"could not read the {documents} documents again: {exc}; run `kbsync sync`",)
        applied = sum(s.documents_applied for s in result.sources)
        return (f"read {documents} documents again from their sources (a sync: "
                f"{applied} documents applied)",)

    def _embed_missing(self) -> tuple[str, ...]:
        """Embed the current chunks that lost their vector (a damaged or pruned cache), as
        a sync would.

        Only for the embedder the store was last synced with: vectors of another one
        (a new model, another dimension) are a sync's to make, with its checks, as is
        a bill over the embedder's bound.
        """
        store, embedder = self.store, self.embedder
        if store.get_meta("embedder") != embedder.identity:
            return ("the embedder changed since the last sync: `kbsync sync` embeds the "
                    "chunks for it",)
        sources = sorted(store.status().by_source)
        try:
            missing = {s: store.unembedded(s, embedder.identity) for s in sources}
            tokens = sum(sum(embedder.count_tokens(list(texts.values())))
                         for texts in missing.values() if texts)
            if self.bound is not None and tokens > self.bound.tokens:
                chunks = sum(len(texts) for texts in missing.values())
                return (f"{chunks:,} chunks ({tokens:,} tokens) have no vector, more than "
                        f"{self.bound.setting}: `kbsync sync --yes` embeds them",)
            embedded = 0
            for source in sources:
                out = SourceTally(source=source)
                backfill(source, store, embedder, out)
                embedded += out.embeddings_backfill
        except StoreError as exc:
            return (f"could not embed the chunks without a vector: {exc}",)
        return (f"embedded {embedded} chunks that had no vector",) if embedded else ()
