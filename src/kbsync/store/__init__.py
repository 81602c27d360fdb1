"""Record stores: documents, chunks, texts, the embedding cache and runs, behind one protocol.

:class:`RecordStore` is the union of narrow roles (:class:`Manifest`,
:class:`EmbeddingCache`, :class:`SearchIndex`, :class:`Mirror`, :class:`RunLog`,
:class:`Meta`, :class:`Erasures`, :class:`Maintenance`), each what one kind of
caller uses.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kbsync.model import PageSchedule, VectorNorm

if TYPE_CHECKING:  # of the protocols' signatures: a store opened to read no vector loads none
    import numpy as np
    import numpy.typing as npt

    from kbsync.core.plan import DocumentPlan, StoredDocument
    from kbsync.store.filters import Filters

__all__ = [
    "ChunkRef",
    "Discarded",
    "DocumentText",
    "EmbeddingCache",
    "Erasures",
    "Frontier",
    "Hit",
    "Maintenance",
    "Manifest",
    "Meta",
    "Mirror",
    "Nearest",
    "RecordStore",
    "RunLog",
    "RunRecord",
    "Schedules",
    "SearchIndex",
    "StoreStatus",
    "Window",
]


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: a chunk of a current document.

    ``context`` is what a reader gets: the chunk itself, or with context windows
    on, the chunk and its neighbours in the same section (``first``..``last``).
    ``score`` is the ranking's raw value (cosine, BM25 or the hybrid fusion's);
    a search's results carry their 1-based ``rank`` and a ``relevance`` in [0, 1]
    (see :mod:`kbsync.app.fusion`).
    """

    source: str
    key: str
    title: str | None
    heading: str | None
    index: int
    start: int
    end: int
    score: float
    text: str
    digest: str
    context: str = ""
    context_tokens: int = 0
    first: int = -1
    last: int = -1
    rank: int = 0
    relevance: float = 0.0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The document's metadata (front matter, HTML meta, PDF info), values as typed."""
    changed: str | None = None
    """When the document's text last changed (the store's UTC time, ISO 8601)."""


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """Where an indexed current chunk lies: what an external vector store's point describes."""

    source: str
    key: str
    index: int
    digest: str
    heading: str | None
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Window:
    """A context window: neighbouring chunks of one section, as text."""

    first: int
    last: int
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class DocumentText:
    """The current and previous canonical text of a document (for diffs)."""

    source: str
    key: str
    title: str | None
    text: str
    previous: str | None
    generation: int
    last_changed: str
    """When the current text was stored."""
    moved_from: str | None = None
    """The key the document had before its last move, if it ever moved."""
    moved: str | None = None
    """When it last moved."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Its metadata (front matter, HTML meta, PDF info), values as typed."""


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


@dataclass(frozen=True, slots=True)
class Nearest:
    """A vector search's hits, best first, and how many chunks it left out because their
    stored vector cannot be right (not finite, or not of the embedder's norm: damaged)."""

    hits: list[Hit]
    unsound: int = 0


@dataclass(frozen=True, slots=True)
class Discarded:
    """What :meth:`Maintenance.discard_damaged` removed so that it can be made again.

    ``vectors`` and ``chunk_texts`` are made again from the texts (embedded, cut from
    the document's text); a damaged ``previous`` text is history that nothing can
    restore; a damaged ``current`` text is read again from its source by the next
    sync, whose gates were told that the document is unknown (``reread``).
    """

    vectors: int = 0
    chunk_texts: int = 0
    previous: int = 0
    current: int = 0

    def __bool__(self) -> bool:
        return bool(self.vectors or self.chunk_texts or self.previous or self.current)

    def lines(self) -> list[str]:
        """What was done, one line per kind, for a person."""
        done = []
        if self.vectors:
            done.append(f"discarded {self.vectors} damaged vectors (those of current chunks "
                        "embedded again below)")
        if self.chunk_texts:
            done.append(f"discarded {self.chunk_texts} damaged chunk texts (cut again from "
                        "their documents' text)")
        if self.previous:
            done.append(f"discarded {self.previous} damaged previous versions' texts (their "
                        "documents' diffs start again from the current text)")
        if self.current:
            done.append(f"discarded {self.current} damaged current texts (read again from "
                        "their sources)")
        return done


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One recorded sync: when it ran and its report (the shape of ``report_dict``)."""

    id: int
    started: str
    finished: str
    report: Mapping[str, Any]


@runtime_checkable
class Frontier(Protocol):
    """Keys a source found but could not take yet (a page that failed when first linked).

    They are no documents (nothing to search, verify or delete): only addresses a
    source is asked to try again, so a page whose first check failed is not lost
    until the page that links to it changes.
    """

    def frontier(self, source: str) -> frozenset[str]:
        """The keys ``source`` is to try again."""
        ...

    def set_frontier(self, source: str, keys: Collection[str]) -> None:
        """Replace the keys of ``source`` to try again (writes nothing when unchanged)."""
        ...


@runtime_checkable
class Schedules(Protocol):
    """The revisit schedule of each page of a source (see :mod:`kbsync.core.schedule`).

    Hints, not records: a lost or stale schedule makes a page due sooner or later,
    never deletes or changes a document.
    """

    def schedules(self, source: str) -> dict[str, PageSchedule]:
        """The schedules of ``source``'s pages, by key."""
        ...

    def set_schedules(self, source: str, schedules: Mapping[str, PageSchedule],
                      replace: bool) -> None:
        """Store ``schedules``; with ``replace`` the source keeps no others."""
        ...


@runtime_checkable
class Manifest(Protocol):
    """The documents of each source: their versions, chunks and texts, and writing a plan.

    What the sync's listing, gates, plans and deletions read and write.
    """

    def manifest(self, source: str, after: str | None = None,
                 limit: int | None = None) -> dict[str, StoredDocument]:
        """Stored documents of ``source`` without their chunk digests (fast: stat gate only).

        In key order (the store's collation); with ``after`` and ``limit``, one page:
        at most ``limit`` documents whose keys come after ``after``.
        """
        ...

    def with_digests(self, source: str, docs: Collection[StoredDocument]) -> list[StoredDocument]:
        """The same documents with the digests of their current chunks filled in."""
        ...

    def batch(self) -> AbstractContextManager[None]:
        """A transaction that every write inside it joins, committed (or not) as one.

        A sync applies a batch of documents in one: all or nothing, as crash-safe as
        one transaction per document, with one commit (and its fsync) for the lot.
        """
        ...

    def apply(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              outbox: Collection[str] = ()) -> None:
        """Apply one document's plan, with its new vectors, in one transaction (or the batch's).

        ``outbox`` are ids of external vectors to delete once the records are
        committed; they are recorded in the same transaction (see :meth:`pending_outbox`).
        """
        ...

    def chunk_digests(self, source: str) -> Iterator[tuple[str, str]]:
        """(key, digest) of every current chunk of ``source``, streamed, in no order.

        Consume it before the next call to the store: it may hold the connection.
        """
        ...

    def boilerplate(self, source: str) -> frozenset[str]:
        """Digests of ``source`` left out of the index as boilerplate."""
        ...

    def boilerplate_counted(self, source: str, share: float, *,
                            replaced: Iterable[str] = (),
                            added: Iterable[tuple[str, str, int]] = (),
                            members: Mapping[str, int] | None = None) -> frozenset[str]:
        """The digests in more than ``share`` of the documents of a host of ``source``
        (:func:`~kbsync.core.plan.boilerplate_of_counts`), by the counts of documents per
        digest the store keeps as it writes them, never by reading every digest.

        With what a sync is about to write, as it will be once written: ``replaced``,
        the keys whose stored chunks will no longer count (re-chunked or gone);
        ``added``, the (host group, digest, documents) that will count instead;
        ``members``, how many documents with chunks those are, by host group.
        """
        ...

    def set_boilerplate(self, source: str, digests: Collection[str]) -> None:
        ...

    def source_names(self) -> set[str]:
        """The sources that have documents in the store."""
        ...

    def mark_missing(self, source: str, key: str) -> None:
        """Count one more check that found the document missing (deleted once confirmed)."""
        ...

    def text_pieces(self, source: str, key: str) -> Iterator[str]:
        """The current text of a document, handed over in pieces as it is read (none if
        there is no such document): a big text need not be held whole to be compared."""
        ...

    def document(self, key: str, source: str | None = None, *,
                 previous: bool = True) -> DocumentText | None:
        """A document's current text, and the one before it unless ``previous`` is false."""
        ...


@runtime_checkable
class EmbeddingCache(Protocol):
    """Vectors by chunk digest and embedder identity: what a sync need not embed again."""

    def cached(self, embedder: str, digests: Collection[str]) -> set[str]:
        """Which of ``digests`` already have a vector for ``embedder``."""
        ...

    def adopt_by_text(self, embedder: str, text_keys: Mapping[str, bytes], *,
                      write: bool = True) -> set[str]:
        """Of ``text_keys`` (digests without a vector -> the
        :func:`~kbsync.core.identity.embedding_text_key` of their text), those whose text has a
        vector for ``embedder`` under another digest; with ``write`` that vector is cached
        under their digest too.

        A vector depends on the text and the model only: a chunk whose identity changed
        (a chunker setting did) but whose text did not is not embedded again.
        """
        ...

    def unembedded(self, source: str, embedder: str) -> dict[str, str]:
        """Digest -> text of the current, indexed chunks of ``source`` with no vector yet."""
        ...

    def put_vectors(self, embedder: str,
                    vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        """Add vectors to the cache in one transaction (a backfill)."""
        ...

    def embedder_dimensions(self) -> dict[str, int]:
        """The dimension of the stored vectors of each embedder identity."""
        ...


@runtime_checkable
class SearchIndex(Protocol):
    """Search over the current, indexed chunks: full text, vectors, context windows."""

    def hits_at(self, refs: Sequence[tuple[str, str, int, str]],
                scores: Sequence[float]) -> list[Hit]:
        """Hits for (source, key, index, digest) of current chunks, in order, with ``scores``.

        A reference to a chunk that is not current any more (another digest at that
        place, or no such document) is left out.
        """
        ...

    def search_text(self, query: str, k: int, filters: Filters | None = None) -> list[Hit]:
        """The ``k`` best full-text hits, of documents meeting ``filters`` when given."""
        ...

    def search_vector(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                      filters: Filters | None = None, norm: VectorNorm | None = None,
                      ) -> Nearest:
        """The ``k`` nearest chunks, of documents meeting ``filters`` when given.

        A stored vector that cannot be right (not finite, or not of ``norm``, the
        embedder's, when given) is left out and counted, never ranked: a damaged vector
        of huge norm would otherwise top every search.
        """
        ...

    def window(self, hit: Hit, budget: int, taken: Collection[int] = ()) -> Window:
        """The hit's chunk grown with its section neighbours up to ``budget`` tokens, not
        into the chunks ``taken`` (by the windows of better hits in the document)."""
        ...

    def document_facts(self, documents: Collection[tuple[str, str]],
                       ) -> dict[tuple[str, str], tuple[str | None, str | None]]:
        """The stored metadata (JSON text) and the time of the last change of each of these
        (source, key) documents that the store holds."""
        ...

    def prepare_vectors(self, dimension: int) -> None:
        """Before a sync loads chunks and vectors of ``dimension``: an index that is cheaper
        to build after a load than to grow row by row (PostgreSQL's HNSW and GIN) is
        deferred when the store holds nothing of it yet, a first load; a store without
        such an index does nothing."""
        ...

    def finish_vectors(self, dimension: int) -> None:
        """After the load (in every driver, once): build what :meth:`prepare_vectors` deferred,
        and any index a load that did not end left deferred."""
        ...


@runtime_checkable
class Mirror(Protocol):
    """What keeping an external vector store a mirror of the records needs
    (:mod:`kbsync.sync.mirror`).

    The outbox of vector ids to delete, the indexed chunks as points, their cached vectors.
    """

    def pending_outbox(self) -> list[str]:
        """Ids of external vectors still to be deleted (the outbox), oldest first."""
        ...

    def clear_outbox(self, ids: Collection[str]) -> None:
        """Forget outbox entries whose deletion the external vector store has done."""
        ...

    def indexed_chunks(self, source: str | None = None, key: str | None = None,
                       filters: Filters | None = None) -> Iterator[ChunkRef]:
        """The current, indexed (not boilerplate) chunks, by source, key and index
        (of documents meeting ``filters``, when given)."""
        ...

    def vectors(self, embedder: str,
                digests: Collection[str]) -> dict[str, npt.NDArray[np.float32]]:
        """Cached vectors of ``digests`` for ``embedder`` (those the cache has)."""
        ...


@runtime_checkable
class RunLog(Protocol):
    """The recorded sync runs and their reports."""

    def record_run(self, started: str, finished: str, report: Mapping[str, Any]) -> int:
        ...

    def runs(self, limit: int = 50) -> list[RunRecord]:
        """The latest ``limit`` recorded runs, newest first."""
        ...

    def run(self, run_id: int) -> RunRecord | None:
        """One recorded run, or None when there is no such run."""
        ...


@runtime_checkable
class Meta(Protocol):
    """Named values a sync keeps for the next (the chunker, held replacements, released
    sources)."""

    def get_meta(self, name: str) -> str | None:
        ...

    def set_meta(self, name: str, value: str) -> None:
        """Set a meta entry; an empty value removes it."""
        ...


@runtime_checkable
class Erasures(Protocol):
    """Keys ``kbsync erase`` removed, remembered so that no sync brings them back."""

    def erase(self, pattern: str) -> list[tuple[str, str]]:
        """Remove documents whose key matches ``pattern`` and every row derived from them."""
        ...

    def add_erasure(self, pattern: str, created: str) -> None:
        """Remember that keys matching ``pattern`` were erased (a tombstone), so that
        listings skip them; recording the same pattern again changes nothing."""
        ...

    def erasures(self) -> list[tuple[str, str]]:
        """The tombstones: ``(pattern, created)`` in pattern order."""
        ...

    def remove_erasure(self, pattern: str) -> bool:
        """Forget the tombstone ``pattern``; whether there was one."""
        ...


@runtime_checkable
class Maintenance(Protocol):
    """Counting, checking and compacting the store, and closing it."""

    def status(self) -> StoreStatus:
        ...

    def verify(self, embedder: str, identity: Callable[[str], str] | None,
               derivations: Collection[str] | None = None,
               norm: VectorNorm | None = None) -> list[str]:
        """Every invariant and every stored value checked; the problems found (empty when
        the store is sound).

        ``identity`` gives a chunk text's identity under the current chunker; with
        ``derivations`` (what the current settings make documents with) only the chunks of
        documents made with one of them are checked against it: after a settings change,
        the others wait for the next sync to be chunked again, and are not damage.
        ``norm`` is ``embedder``'s (:class:`~kbsync.model.VectorNorm`; without it its
        vectors need only be finite). Damage found (to the file or to a value, see
        :mod:`kbsync.store.values`) is remembered (:meth:`known_damage`); a verify that
        finds none forgets what a verify remembered.
        """
        ...

    def discard_damaged(self, embedder: str, identity: Callable[[str], str] | None,
                        derivations: Collection[str] | None = None,
                        norm: VectorNorm | None = None) -> Discarded:
        """Remove the values that :meth:`verify` finds damaged, so that they are made again:
        vectors (to be embedded again), chunk texts (to be cut again from their
        document's text), previous texts (lost), current texts (their documents are
        forgotten by the gates, so the next sync reads them again)."""
        ...

    def known_damage(self) -> str | None:
        """Why the store is known to be damaged (a check failed, or the database said so
        during any command), or None. It outlives the process, beside the damaged data
        (a file beside a SQLite store, a row in PostgreSQL), until
        :meth:`remember_damage` forgets it (a repair or a rebuild that worked)."""
        ...

    def remember_damage(self, reason: str | None) -> None:
        """Remember that the store is damaged, and why (naming no document: an erasure
        must leave no key behind); None forgets it."""
        ...

    def check_pages(self) -> str | None:
        """The database's own check of every page (SQLite's quick_check), where it has one
        cheap enough to run before a full revalidation writes: what it found (then also
        remembered as damage), or None when it found nothing or has no such check."""
        ...

    def repair(self, rechunk: Callable[[str], Mapping[str, str]]) -> list[str]:
        """Rebuild what the store holds twice (its indexes, the full-text index, chunk texts
        cut again from their document's text by ``rechunk``, which maps a text to the
        digests and texts of its chunks, the digest counts that boilerplate is decided
        from, if they differ from a recount); what was done, as lines for a person."""
        ...

    def gc(self) -> dict[str, int]:
        """Drop unreferenced cache entries and texts, and compact the file."""
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class RecordStore(Manifest, EmbeddingCache, SearchIndex, Mirror, RunLog, Meta, Erasures,
                  Maintenance, Protocol):
    """Everything kbsync remembers: every role at once. Each ``apply`` is one transaction,
    or part of a :meth:`batch`.

    A caller that needs only some roles takes those (a sync step that only embeds
    takes an :class:`EmbeddingCache`), so a fake of it is small.
    """
