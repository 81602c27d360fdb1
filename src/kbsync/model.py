"""Frozen, typed values shared by every layer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, TypeAlias, get_args

__all__ = [
    "SEARCH_MODES",
    "Boundary",
    "ByteChunk",
    "ChangeReport",
    "Chunk",
    "ChunkingDiagnostics",
    "ChunkingResult",
    "ItemError",
    "KnownItem",
    "Listing",
    "MetadataValue",
    "PageSchedule",
    "Record",
    "Region",
    "SearchMode",
    "Section",
    "SourceItem",
    "SourceStat",
    "Validators",
    "Verdict",
]

SearchMode = Literal["vector", "text", "hybrid"]
"""How a search ranks: embeddings, full text, or both fused."""
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)


class Boundary(StrEnum):
    """Why a chunk ends where it does."""

    PRIMARY = "primary"
    """The fingerprint met the primary condition (TTTD) or is a local minimum (local)."""
    BACKUP = "backup"
    """TTTD: no primary candidate before the maximum, so the latest backup candidate."""
    HARD = "hard"
    """No candidate at all: cut at the maximum size (or after a single over-long word)."""
    FORCED = "forced"
    """Strictly local: a winnowing pick in a stretch with no primary candidate."""
    FINAL = "final"
    """The end of the input."""
    TAIL = "tail"
    """Sentences: before the last sentences of a long chunk that ends a paragraph."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of normalized text.

    ``start`` and ``end`` are character offsets into the text that was chunked
    (before normalization); ``text`` is the canonical chunk text the identity
    commits to.
    """

    index: int
    text: str
    start: int
    end: int
    token_count: int
    boundary: Boundary
    identity: str
    snapped: bool = False


@dataclass(frozen=True, slots=True)
class ChunkingDiagnostics:
    """Figures of one chunking run, printed by ``kbsync chunk`` and stored with every sync."""

    strategy: str
    chunker_id: str
    params_hash: str
    normalizer_version: int
    token_counter: str
    snapping: bool
    chunk_count: int
    tokens_total: int
    tokens_min: int
    tokens_p50: int
    tokens_p95: int
    tokens_max: int
    tokens_mean: float
    primary_cuts: int
    backup_cuts: int
    hard_cuts: int
    forced_cuts: int
    final_cuts: int
    snapped_cuts: int
    tail_cuts: int = 0

    @property
    def hard_cut_rate(self) -> float:
        """Share of chunks that ended in a hard cut (a sign of masks too narrow for the text)."""
        return self.hard_cuts / self.chunk_count if self.chunk_count else 0.0


@dataclass(frozen=True, slots=True)
class ChunkingResult:
    """Chunks of one text and the diagnostics of the run that made them."""

    chunks: tuple[Chunk, ...]
    diagnostics: ChunkingDiagnostics

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self.chunks)

    def __len__(self) -> int:
        return len(self.chunks)


@dataclass(frozen=True, slots=True)
class ByteChunk:
    """A chunk of the byte-level CDC: where it lies and the digest of its bytes."""

    index: int
    offset: int
    length: int
    digest: str


@dataclass(frozen=True, slots=True)
class Region:
    """A half-open run ``[offset, offset + length)`` of the new version that changed."""

    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length


class Verdict(StrEnum):
    """How a change should be routed."""

    UNCHANGED = "unchanged"
    COSMETIC = "cosmetic"
    """Similarity ≥ 0.98: a typo fix or whitespace-level edit."""
    REPROCESS = "reprocess"
    """An ordinary edit: re-derive the changed chunks."""
    REEXAMINE_EXTRACTION = "reexamine-extraction"
    """Similarity ≤ 0.05 and less than half of the old text kept: probably a different page
    at the same address, or broken extraction."""


@dataclass(frozen=True, slots=True)
class ChangeReport:
    """What changed between two versions of one document (see :func:`kbsync.compare`).

    ``similarity`` is the share of the document that is unchanged (for text: the
    normalized bytes of both versions outside the words added and removed, over
    the bytes of both; see :func:`kbsync.compare`). ``regions`` are the
    runs of the new version not found in the old one and ``removed_regions``
    those of the old version not found in the new one, in the units of the
    input as given (characters for text, whole words; bytes for bytes).
    ``added`` and ``removed`` are the byte-CDC chunks of the normalized texts.
    """

    changed: bool
    similarity: float
    added: tuple[ByteChunk, ...]
    removed: tuple[ByteChunk, ...]
    kept: int
    moved: int
    regions: tuple[Region, ...]
    verdict: Verdict
    removed_regions: tuple[Region, ...] = ()


@dataclass(frozen=True, slots=True)
class Section:
    """A part of an extracted document: an optional heading and its body text."""

    heading: str | None
    text: str
    level: int = 0


MetadataValue: TypeAlias = "str | int | float | bool | tuple[MetadataValue, ...]"
"""A metadata value as its document has it: text, a number, a boolean, a date or time (its
ISO 8601 text, ``2024-05-01``), or a list of those (a tuple, stored as a JSON list)."""


@dataclass(frozen=True, slots=True)
class Record:
    """What an extractor makes of a document's bytes.

    ``metadata`` is a sorted tuple of (name, value) pairs so the record stays
    hashable and its serialization canonical; values keep their types
    (:data:`MetadataValue`), so filters compare numbers and dates as such.
    """

    title: str | None
    description: str | None
    sections: tuple[Section, ...]
    metadata: tuple[tuple[str, MetadataValue], ...] = ()
    # What the extraction had to repair, one line each (the sync reports them per document).
    warnings: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The record's text: each section's heading and body, separated by blank lines."""
        parts: list[str] = []
        for s in self.sections:
            if s.heading:
                parts.append(s.heading)
            if s.text:
                parts.append(s.text)
        return "\n\n".join(parts)


@dataclass(frozen=True, slots=True)
class SourceStat:
    """What the stat gate compares: unchanged size, mtime and inode mean "not read at all"."""

    size: int
    mtime_ns: int
    inode: int


@dataclass(frozen=True, slots=True)
class Validators:
    """HTTP validators of a fetched page, sent back as If-None-Match / If-Modified-Since."""

    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One document as a source lists it, before anything is read.

    ``key`` is the natural key (a POSIX path relative to the root, NFC; or a
    canonical URL), ``locator`` where to read it from. A web source sets
    ``validators``, and ``not_modified`` when the server answered 304: then the
    document is unchanged without being read.
    """

    key: str
    locator: str
    media_type: str
    stat: SourceStat | None = None
    validators: Validators | None = None
    not_modified: bool = False
    # (name, value) pairs the source knows of this version (a git commit), sorted;
    # merged into the document's metadata when it is read.
    metadata: tuple[tuple[str, str], ...] = ()
    # The key the source says this document had in its previous listing (git's rename
    # detection): a rename with edits, which the text alone cannot tell from a new file.
    renamed_from: str | None = None


@dataclass(frozen=True, slots=True)
class PageSchedule:
    """When a page was last checked and seen changed, and how long until its next check.

    Times are seconds since the epoch, ``interval`` in seconds (see
    :mod:`kbsync.schedule`). ``digest`` is a hash of the body last downloaded,
    so a 200 with the same bytes counts as unchanged; ``media_type`` is the one
    last answered, so a page left unchecked is listed as it was.
    """

    checked: float
    changed: float
    interval: float
    digest: str = ""
    media_type: str = ""


@dataclass(frozen=True, slots=True)
class KnownItem:
    """What the store remembers of a document, handed to a source before it lists.

    ``missing`` counts consecutive checks that found the document absent in a
    way that may be temporary (an HTTP 404), so a source can confirm a deletion
    on the second check. ``pending`` marks a key the store holds no document
    for: one the source found but could not take last time (the frontier), to
    be tried again. ``schedule`` is the page's revisit schedule, if it has one.
    """

    key: str
    stat: SourceStat | None = None
    validators: Validators | None = None
    missing: int = 0
    pending: bool = False
    schedule: PageSchedule | None = None


@dataclass(frozen=True, slots=True)
class ItemError:
    """A per-document problem met while listing or reading; the run goes on.

    The stored version of the document is kept. ``missing`` marks an absence that
    is deleted only when a later check confirms it.
    """

    key: str
    message: str
    missing: bool = False


@dataclass(frozen=True, slots=True)
class Listing:
    """A source's listing. ``complete`` is false when it may have missed documents
    (root missing, permission denied): then nothing may be deleted."""

    items: tuple[SourceItem, ...]
    complete: bool = True
    errors: tuple[ItemError, ...] = ()
    warnings: tuple[str, ...] = ()
    # The version of the source that was listed, when it has one (a git commit and its
    # author date); the run's report says it.
    revision: str = ""
