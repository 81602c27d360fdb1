"""The pure diff between what the store holds and what the sources hold now.

Inputs are values (the stored manifest of one source, its fresh listing and
what was learnt about each listed document); the output is a :class:`Plan` that
says, per document, what to do, and per chunk, whether it is kept, moved,
added or deleted. Nothing here reads, writes or embeds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from kbsync.model import SourceStat, Validators

__all__ = [
    "BOILERPLATE_MIN_DOCUMENTS",
    "BOILERPLATE_SHARE",
    "Action",
    "ChunkDraft",
    "ChunkOps",
    "DocumentPlan",
    "DocumentVersion",
    "Failed",
    "Held",
    "Plan",
    "Refreshed",
    "StoredDocument",
    "Unchanged",
    "boilerplate",
    "boilerplate_floor",
    "boilerplate_of_counts",
    "chunk_ops",
    "host_group",
    "mass_deletion",
    "plan",
    "text_key",
]


class Action(StrEnum):
    """What happens to one document.

    ``RECHUNKED``: the same text made into chunks another way (a chunker or extractor
    setting changed); its chunks are replaced in place, so the text's last real edit
    stays the one ``diff`` shows. ``HELD``: a new text that shares almost nothing with
    the stored one, which keeps its stored version until a second sync sees the same
    text (:func:`kbsync.sync.replacements.route_replacement`).
    """

    NEW = "new"
    MODIFIED = "modified"
    RECHUNKED = "rechunked"
    METADATA = "metadata-only"
    MOVED = "moved"
    DELETED = "deleted"
    HELD = "held"
    UNCHANGED = "unchanged"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """The store's record of one document, as the plan needs it."""

    key: str
    stat: SourceStat | None
    bytes_hash: str
    text_hash: str
    derivation: str
    title: str | None
    metadata: str
    generation: int
    chunk_digests: tuple[str, ...]
    validators: Validators | None = None
    missing: int = 0


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """A freshly made chunk of a document version.

    ``embedding_key`` is the embedding cache's key of its text
    (:func:`kbsync.core.identity.embedding_text_key`), made once with the chunk: the
    scratch file, the cache lookup and the store all need it.
    """

    digest: str
    text: str
    section: int
    heading: str | None
    start: int
    end: int
    tokens: int
    boundary: str
    embedding_key: bytes

    def __reduce__(self) -> tuple[type[ChunkDraft], tuple[object, ...]]:
        # Chunks read wait pickled for their batch: a slotted dataclass pickles through a
        # state built field by field, more than twice as slow as its fields as a tuple.
        return ChunkDraft, (self.digest, self.text, self.section, self.heading, self.start,
                            self.end, self.tokens, self.boundary, self.embedding_key)


@dataclass(frozen=True, slots=True)
class DocumentVersion:
    """A document as read, extracted, normalized and chunked in this run.

    ``chunks`` is empty when the text hash matched the stored one (gate 3): the
    document was not re-chunked.
    """

    key: str
    locator: str
    media_type: str
    stat: SourceStat | None
    bytes_hash: str
    text_hash: str
    derivation: str
    title: str | None
    metadata: str
    text: str
    chunks: tuple[ChunkDraft, ...]
    rechunked: bool = True
    validators: Validators | None = None
    renamed_from: str | None = None
    """The key the source says the document had before (see ``SourceItem.renamed_from``)."""


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Gate 1: the stat matched, so the document was not read at all."""

    key: str


@dataclass(frozen=True, slots=True)
class Refreshed:
    """Gate 2 (or an HTTP 304): the content is as before; only stat and validators change."""

    key: str
    stat: SourceStat | None
    validators: Validators | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The document could not be read or extracted; its stored version stays as it is.

    ``missing`` marks an absence to be confirmed by a later check (an HTTP 404).
    A document read and found unreadable carries the ``stat`` and ``derivation`` it
    was read at, so the next sync can skip it while they are the same.
    """

    key: str
    message: str
    missing: bool = False
    stat: SourceStat | None = None
    derivation: str = ""


@dataclass(frozen=True, slots=True)
class Held:
    """A new text that shares almost nothing with the stored one, held until confirmed."""

    key: str


Observation = Unchanged | Refreshed | Failed | Held | DocumentVersion


@dataclass(frozen=True, slots=True)
class ChunkOps:
    """Chunk-level diff of one document: counts, and the digests that are new to it
    (``added_counts``: how many chunks of each of those are added)."""

    kept: int = 0
    moved: int = 0
    added: int = 0
    deleted: int = 0
    added_digests: tuple[str, ...] = ()
    added_counts: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class DocumentPlan:
    """What to do with one document.

    ``refresh`` marks an unchanged document whose stored stat, validators or bytes hash
    are out of date (a ``touch``, a re-download of the same text): its row is updated,
    but its content is the same, so it is reported as unchanged.

    ``edited`` marks a move whose text changed too (a rename the source reported, with
    edits): the document keeps its record under the new key, and its new version is
    written there, reusing the vectors of the chunks it kept.


    ``reread`` marks a rechunked document whose text is another although its source's
    bytes are the same (its extractor changed): its new text is written as a new version.
    """

    key: str
    action: Action
    version: DocumentVersion | None = None
    previous_key: str | None = None
    stat: SourceStat | None = None
    validators: Validators | None = None
    ops: ChunkOps = ChunkOps()
    message: str = ""
    missing: bool = False
    refresh: bool = False
    edited: bool = False
    reread: bool = False

    @property
    def writes(self) -> bool:
        """Whether applying this document changes the store."""
        return self.refresh or self.action not in (Action.UNCHANGED, Action.HELD, Action.FAILED)


@dataclass(frozen=True, slots=True)
class Plan:
    """The plan of one source. ``to_embed`` are the digests missing from the embedding cache."""

    source: str
    documents: tuple[DocumentPlan, ...]
    to_embed: tuple[str, ...]
    deletions_blocked: bool = False
    boilerplate_added: int = 0
    """Added chunks whose digest is boilerplate (``skip``): neither embedded nor reused."""

    @property
    def writes(self) -> bool:
        """Whether applying this plan changes anything in the store."""
        return any(d.writes for d in self.documents)


def chunk_ops(old: Iterable[str], new: Iterable[str]) -> ChunkOps:
    """Keep (same digest, same position), move (elsewhere), add and delete, as multisets."""
    old_list, new_list = list(old), list(new)
    same_place = sum(a == b for a, b in zip(old_list, new_list, strict=False))
    old_count, new_count = Counter(old_list), Counter(new_list)
    common = sum((old_count & new_count).values())
    added = new_count - old_count
    digests = tuple(d for d in dict.fromkeys(new_list) if d in added)
    return ChunkOps(
        kept=same_place,
        moved=common - same_place,
        added=sum(added.values()),
        deleted=sum((old_count - new_count).values()),
        added_digests=digests,
        added_counts=tuple(added[d] for d in digests),
    )


def plan(
    source: str,
    stored: Mapping[str, StoredDocument],
    listed: Iterable[str],
    observations: Iterable[Observation],
    cached: Iterable[str] = (),
    *,
    listing_complete: bool = True,
    allow_mass_delete: bool = False,
    skip: Collection[str] = frozenset(),
    delete: bool = True,
) -> Plan:
    """Diff one source's stored manifest against its fresh listing.

    A document observed under a new key with the exact text of a stored one
    whose key vanished from this listing is *moved*: its chunks and vectors are
    kept. So is one whose source names a vanished key it was renamed from
    (``renamed_from``), with its edits planned as those of a modified document.
    Deletions need a complete listing, and more than half of a source's
    documents going at once needs ``allow_mass_delete``. Digests in ``skip``
    (boilerplate left out of the index) are never embedded.

    With ``delete`` false, vanished documents serve only as origins of moves and
    nothing is deleted: the plan of one batch of a source's documents, whose
    deletions are planned once every batch has had its chance to move them.
    """
    listed_keys = set(listed)
    observed = {o.key: o for o in observations}
    vanished = [k for k in stored if k not in listed_keys] if listing_complete else []
    origins = _Origins(stored, vanished)
    docs = [_document_plan(observed[key], stored.get(key), origins) for key in sorted(observed)]
    deletions = [k for k in vanished if k not in origins.taken]
    blocked = delete and not allow_mass_delete and mass_deletion(len(stored), len(deletions))
    if delete and not blocked:
        for key in deletions:
            docs.append(DocumentPlan(key, Action.DELETED,
                                     ops=ChunkOps(deleted=len(stored[key].chunk_digests))))
    needed, boilerplate = _to_embed(docs, set(cached) | set(skip), skip)
    return Plan(
        source=source,
        documents=tuple(docs),
        to_embed=needed,
        deletions_blocked=blocked,
        boilerplate_added=boilerplate,
    )


class _Origins:
    """The vanished documents of a plan, by text, that a new key may have moved from."""

    def __init__(self, stored: Mapping[str, StoredDocument], vanished: Sequence[str]) -> None:
        self.stored = stored
        self.vanished = set(vanished)
        self.taken: set[str] = set()
        self._by_text: dict[str, list[str]] = {}
        for k in vanished:
            self._by_text.setdefault(text_key(stored[k]), []).append(k)

    def with_text(self, version: DocumentVersion) -> str | None:
        """Take the first vanished document with this version's exact text, if any."""
        candidates = self._by_text.get(text_key(version), [])
        if not candidates:
            return None
        origin = candidates.pop(0)
        self.taken.add(origin)
        return origin

    def named(self, key: str | None) -> str | None:
        """Take the vanished document ``key`` (what a source says a file was renamed from)."""
        if key is None or key not in self.vanished or key in self.taken:
            return None
        self.taken.add(key)
        self._by_text[text_key(self.stored[key])].remove(key)
        return key


def _document_plan(obs: Observation, old: StoredDocument | None,
                   origins: _Origins) -> DocumentPlan:
    """What the plan does to one observed document (``old``: its stored record, if any)."""
    key = obs.key
    if isinstance(obs, Unchanged):
        return DocumentPlan(key, Action.UNCHANGED)
    if isinstance(obs, Held):
        return DocumentPlan(key, Action.HELD)
    if isinstance(obs, Failed):
        return DocumentPlan(key, Action.FAILED, message=obs.message,
                            missing=obs.missing and old is not None)
    if isinstance(obs, Refreshed):
        return (DocumentPlan(key, Action.UNCHANGED, stat=obs.stat, validators=obs.validators,
                             refresh=True) if old else DocumentPlan(key, Action.FAILED))
    if old is None:
        return _new_or_moved(obs, origins)
    if not obs.rechunked:  # the same text: only the title or metadata can differ
        same = (obs.title, obs.metadata) == (old.title, old.metadata)
        return DocumentPlan(key, Action.UNCHANGED if same else Action.METADATA, version=obs,
                            stat=obs.stat, refresh=same,
                            ops=ChunkOps() if same else ChunkOps(kept=len(old.chunk_digests)))
    ops = chunk_ops(old.chunk_digests, (c.digest for c in obs.chunks))
    same_text = obs.text_hash == old.text_hash
    # The same bytes read by another extractor (a new version that drops markup) make
    # another text, but nobody edited the document: it is rechunked, with the new text.
    reread = (not same_text and obs.bytes_hash == old.bytes_hash
              and obs.derivation != old.derivation)
    return DocumentPlan(key, Action.RECHUNKED if same_text or reread else Action.MODIFIED,
                        version=obs, ops=ops, reread=reread)


def _new_or_moved(obs: DocumentVersion, origins: _Origins) -> DocumentPlan:
    """A document at a key the store does not hold: moved from a vanished one with its exact
    text, or from the one its source says it was renamed from (with edits), else new."""
    origin = origins.with_text(obs)
    if origin is not None:
        digests = origins.stored[origin].chunk_digests
        return DocumentPlan(obs.key, Action.MOVED, version=obs, previous_key=origin,
                            ops=ChunkOps(kept=len(digests)))
    renamed = origins.named(obs.renamed_from)
    if renamed is not None:
        ops = chunk_ops(origins.stored[renamed].chunk_digests, (c.digest for c in obs.chunks))
        return DocumentPlan(obs.key, Action.MOVED, version=obs, previous_key=renamed, ops=ops,
                            edited=True)
    return DocumentPlan(obs.key, Action.NEW, version=obs,
                        ops=chunk_ops((), (c.digest for c in obs.chunks)))


def _to_embed(docs: Sequence[DocumentPlan], have: Collection[str],
              skip: Collection[str]) -> tuple[tuple[str, ...], int]:
    """The digests the documents add that have no vector (each once), and how many chunks
    they add that are boilerplate (never embedded)."""
    needed: dict[str, None] = {}
    boilerplate = 0
    for d in docs:
        for digest, count in zip(d.ops.added_digests, d.ops.added_counts, strict=True):
            if digest in skip:
                boilerplate += count
            elif digest not in have:
                needed[digest] = None
    return tuple(needed), boilerplate


def text_key(doc: StoredDocument | DocumentVersion) -> str:
    """What a renamed document shares with its origin: the same text, made the same way."""
    return doc.text_hash + "|" + doc.derivation


def mass_deletion(stored: int, deletions: int) -> bool:
    """Whether deleting ``deletions`` of a source's ``stored`` documents at once needs consent.

    More than half of a source vanishing is more often a mistake (a wrong root, an
    unmounted disk, a site down) than a real change.
    """
    return deletions > 0 and 2 * deletions > stored


BOILERPLATE_SHARE = 0.05
"""The default share of a host's documents past which a chunk is boilerplate."""

BOILERPLATE_MIN_DOCUMENTS = 3
"""The fewest documents a chunk must be in to be boilerplate: two copies of a file are not."""


def boilerplate(
    documents: Mapping[str, Collection[str]], share: float,
    min_documents: int = BOILERPLATE_MIN_DOCUMENTS,
) -> frozenset[str]:
    """Chunk digests found in more than ``share`` of the documents of one host.

    ``documents`` maps a key to the digests of its current chunks; keys that are
    URLs are grouped by host (:func:`host_group`), other keys form one group. A
    digest counts only when at least ``min_documents`` documents share it, so two
    copies of a file are not boilerplate.
    """
    members: Counter[str] = Counter()
    counts: Counter[tuple[str, str]] = Counter()
    for key, digests in documents.items():
        group = host_group(key)
        members[group] += 1
        counts.update((group, d) for d in set(digests))
    return boilerplate_of_counts(((g, d, n) for (g, d), n in counts.items()), members,
                                 share, min_documents)


def boilerplate_of_counts(
    counts: Iterable[tuple[str, str, int]], members: Mapping[str, int], share: float,
    min_documents: int = BOILERPLATE_MIN_DOCUMENTS,
) -> frozenset[str]:
    """:func:`boilerplate` from counts: (group, digest, documents holding it) and group sizes.

    What a store answers from the counts it keeps, so that no sync counts a whole source.
    """
    floors = {group: boilerplate_floor(n, share, min_documents) for group, n in members.items()}
    return frozenset(d for group, d, n in counts
                     if n >= floors.get(group, boilerplate_floor(0, share, min_documents)))


def boilerplate_floor(members: int, share: float,
                      min_documents: int = BOILERPLATE_MIN_DOCUMENTS) -> int:
    """The fewest documents of a group of ``members`` that make a chunk boilerplate: more
    than ``share`` of them, and at least ``min_documents``.

    A whole number, so that a store finds the digests over it by a range of its index.
    """
    return max(min_documents, math.floor(share * members) + 1)


def host_group(key: str) -> str:
    """The boilerplate group of a key: the lower-cased host of a URL, "" for anything else."""
    _, sep, rest = key.partition("://")
    return rest.split("/", 1)[0].lower() if sep else ""
