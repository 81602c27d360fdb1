"""Frozen, typed values shared by every layer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args

if TYPE_CHECKING:  # the values of this module need no NumPy: a command that starts loads none
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ANY_NORM",
    "FUSIONS",
    "NORM_TOLERANCE",
    "RACY_WINDOW_NS",
    "SEARCH_MODES",
    "UNIT_NORM",
    "Boundary",
    "ByteChunk",
    "ChangeKind",
    "ChangeReport",
    "Chunk",
    "ChunkingDiagnostics",
    "ChunkingResult",
    "FieldChange",
    "Fusion",
    "ItemError",
    "KnownItem",
    "Listing",
    "MetadataValue",
    "PageSchedule",
    "Record",
    "Region",
    "RootIdentity",
    "SearchMode",
    "Section",
    "SourceItem",
    "SourceStat",
    "Validators",
    "VectorNorm",
    "Verdict",
]

SearchMode = Literal["vector", "text", "hybrid"]
"""How a search ranks: embeddings, full text, or both fused."""
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)

Fusion = Literal["scores", "ranks"]
"""How hybrid search fuses its rankings: by each hit's score scaled between its list's last
candidate and best, or by reciprocal rank (:func:`kbsync.app.fusion.fuse`)."""
FUSIONS: tuple[str, ...] = get_args(Fusion)


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


class ChangeKind(StrEnum):
    """What an edit is, by what changed (see :mod:`kbsync.core.edits`)."""

    UNCHANGED = "unchanged"
    COSMETIC = "cosmetic"
    """Only whitespace, punctuation, case, re-wrapping or a few spelling fixes."""
    SUBSTANTIVE = "substantive"
    """Anything else: words, or a number, date, version, negation, modal word, metadata
    field, heading or identifier, however small."""


class Verdict(StrEnum):
    """How a change should be routed."""

    UNCHANGED = "unchanged"
    COSMETIC = "cosmetic"
    """A cosmetic edit (:attr:`ChangeKind.COSMETIC`): whitespace, punctuation, case or a
    few spelling fixes, whatever its similarity."""
    REPROCESS = "reprocess"
    """A substantive edit: re-derive the changed chunks."""
    REEXAMINE_EXTRACTION = "reexamine-extraction"
    """Similarity ≤ 0.1 and less than half of the old text kept: probably a different page
    at the same address, or broken extraction."""


@dataclass(frozen=True, slots=True)
class ChangeReport:
    """What changed between two versions of one document (see :func:`kbsync.core.compare`).

    ``similarity`` is the share of the document that is unchanged (for text: the
    normalized bytes of both versions outside the words added and removed, over
    the bytes of both; see :func:`kbsync.core.compare`). ``regions`` are the
    runs of the new version not found in the old one and ``removed_regions``
    those of the old version not found in the new one, in the units of the
    input as given (characters for text, whole words; bytes for bytes).
    ``added`` and ``removed`` are the byte-CDC chunks of the normalized texts.
    ``kind`` says what the edit is by what changed, and ``reason`` names the first
    change that decides it (``number 950 → 975``, ``negation: added "not"``,
    ``12 words changed``; for a cosmetic edit what changed: ``punctuation, case``);
    ``kind`` is None in a report stored before edits were classified. ``fields`` are the
    document's metadata fields the change set, changed or removed, with their values.
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
    kind: ChangeKind | None = None
    reason: str = ""
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True, slots=True)
class FieldChange:
    """A metadata field of a document that a change set, changed or removed: its name and
    its value before and after, as text (JSON for a value that is not text); None where
    the field was absent."""

    field: str
    before: str | None
    after: str | None


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


RACY_WINDOW_NS = 3_000_000_000
"""How much older than its listing a modification time must be for its stat to be trusted.

A write after the listing is stamped no earlier than the listing's time, rounded down
to the file system's granularity (2 s on FAT, 1 s on ext2/ext3 with small inodes,
HFS+ and many network mounts), or earlier still by a clock on the file server that
runs behind this machine's. So a modification time within this window of the listing
(or after it, from a server clock that runs ahead) may be shared by a later write
of the same size: git's "racily clean" entries. 2 s of granularity and 1 s of clock
difference."""


@dataclass(frozen=True, slots=True)
class SourceStat:
    """What the stat gate compares: unchanged size, mtime and inode mean "not read at all".

    ``racy`` marks a stat whose modification time was not safely older than the
    listing that took it (:data:`RACY_WINDOW_NS`): a later write within the same
    timestamp tick leaves it as it is, so the next sync must not skip the document
    on it and compares its bytes instead. A stat recorded once it is no longer racy
    is trusted again. A stat made of content ids (a git blob, an object's ETag) is
    never racy.
    """

    size: int
    mtime_ns: int
    inode: int
    racy: bool = False

    @classmethod
    def listed(cls, size: int, mtime_ns: int, inode: int, listed_at_ns: int) -> SourceStat:
        """The stat of a file whose modification time a listing begun at ``listed_at_ns``
        (nanoseconds since the epoch, on this machine's clock) found; racy when that time
        is not at least :data:`RACY_WINDOW_NS` older than the listing."""
        return cls(size, mtime_ns, inode, racy=mtime_ns > listed_at_ns - RACY_WINDOW_NS)


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
    :mod:`kbsync.core.schedule`). ``digest`` is a hash of the body last downloaded,
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
class RootIdentity:
    """The directory a folder source's listing walked: its device and inode.

    Recorded with each listing, so that a root on another device than last time (a
    disk unmounted before the sync, its empty mount point left behind) is not taken
    for a folder whose documents were all deleted.
    """

    device: int
    inode: int


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
    # The directory listed, for a source that walks one on this machine.
    root: RootIdentity | None = None


NORM_TOLERANCE = 1e-3
"""How far, relative to it, a stored vector's L2 norm may be from its embedder's before
``verify`` calls it damaged and search leaves it out.

A vector normalized in float32 is within about 1e-6 of unit length (rounding of its
components), so a thousand times that leaves room for any model's arithmetic, while
damage that changes a norm by a tenth of a percent or more is caught. (Damage that
keeps the norm, a few low bits of a component, moves a score by as little.)
"""


@dataclass(frozen=True, slots=True)
class VectorNorm:
    """The L2 norm of every vector an embedder makes: what a stored vector of it must have.

    ``length`` None means the norm varies from text to text (a model that does not
    normalize): then only finiteness can be checked. ``zero`` allows the all-zero
    vector too (the hashing embedder's for a text with no word to hash). Whatever the
    norm, a vector with a NaN or infinite component cannot be right.
    """

    length: float | None = 1.0
    zero: bool = False

    def unsound(self, norms: npt.NDArray[np.floating]) -> npt.NDArray[np.bool_]:
        """Which of the vectors whose L2 ``norms`` are given cannot be right (a non-finite
        component makes a non-finite norm)."""
        import numpy as np

        norms = np.asarray(norms, dtype=np.float64)
        right = np.isfinite(norms)
        if self.length is not None:
            near = np.abs(norms - self.length) <= NORM_TOLERANCE * self.length
            right &= near | (norms == 0) if self.zero else near
        unsound: npt.NDArray[np.bool_] = ~right
        return unsound

    def describe(self) -> str:
        """The norm in words, for messages: "1", "1 (or 0)", or "any finite"."""
        if self.length is None:
            return "any finite"
        return f"{self.length:g}" + (" (or 0)" if self.zero else "")


UNIT_NORM = VectorNorm(1.0)
"""The norm of a normalizing model's vectors."""

ANY_NORM = VectorNorm(None)
"""What is known of an embedder that does not say: its vectors are finite."""
