"""Maintenance: the verbs that check, mend, compact and edit a knowledge base (verify,
rebuild, reconcile, erase, gc, its sources)."""

from __future__ import annotations

import fnmatch

from kbsync.app._reading import Reading
from kbsync.app.mending import Mending
from kbsync.app.results import (
    Collected,
    DocumentRef,
    Erased,
    Erasure,
    Rebuilt,
    Verification,
)
from kbsync.engine import (
    add_source,
    make_sources,
    remove_source,
)
from kbsync.errors import ConfigError, KbsyncError, ParameterError, StoreError
from kbsync.extract.registry import extractor_for
from kbsync.report import SyncResult
from kbsync.store import RecordStore
from kbsync.sync import (
    Progress,
    is_key_hash,
    release_source,
    sync_sources,
    tombstone,
    utc_now,
)
from kbsync.sync.mirror import Reconciliation

__all__ = ["Maintaining"]


class Maintaining(Reading):
    """The verbs that maintain (a mixin of :class:`~kbsync.app.knowledge_base.KnowledgeBase`);
    the history of a document (:class:`._reading.Reading`) says what an erasure did."""

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
        self._progress = progress
        with self._writing(wait, None, mending=True):  # which removes what a killed rebuild left
            old = self.store

            def fill(new: RecordStore) -> SyncResult:
                self.store = new  # and so the vector index, which follows the store
                result = sync_sources(
                    self.sources, new, self.embedder, extractor_for, self.config.chunker,
                    self._options(allow_mass_delete=True), progress=progress,
                    index=self.vector_index)
                if not all(s.listing_complete for s in result.sources):
                    raise StoreError(f"{self.config.store_location}: a source could not be "
                                     "listed in full, so the rebuilt store would miss "
                                     "documents; the old store is left as it was")
                return result

            try:
                done = self.config.store_kind.rebuild(self.config.store.settings,
                                                      self.config.root, old, fill)
            except BaseException:
                self.store = old
                raise
            self.store = done.store
        result = done.value
        reused = sum(s.embeddings_reused for s in result.sources)
        return Rebuilt(result, done.salvaged, reused, done.backup)

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
