"""What the steps of one sync share (:class:`Context`), and the values they hand each other.

Every value here pickles (frozen dataclasses of strings, numbers, tuples and the pure
core's observations and plans; no open store, file or thread), so a driver may run a
step in another process, or on another machine, than the step before it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kbsync.core.chunking import ChunkShape, shape_of
from kbsync.core.plan import Observation, StoredDocument
from kbsync.embed import Embedder
from kbsync.model import Boundary, Chunk, SourceItem
from kbsync.store import Erasures, Meta
from kbsync.sync.apply import Applying
from kbsync.sync.chunker import Chunker
from kbsync.sync.observe import ExtractorFor
from kbsync.sync.options import SyncOptions
from kbsync.sync.tally import Clock, Progress, SourceTally
from kbsync.sync.vector_index import VectorIndex

__all__ = [
    "Batching",
    "Context",
    "Decision",
    "ObservedBatch",
    "ReadJob",
    "shapes_data",
    "shapes_of_data",
]


class Batching(Applying, Meta, Erasures, Protocol):
    """What the steps use of a store: its manifest (stored digests and texts), its
    embedding cache, meta (the replacements held, the boilerplate's record) and the
    erasures a listing skips."""


@dataclass(frozen=True)
class Context:
    """What every step of one sync shares: the store's roles, the embedder, the extractors,
    the chunker, how the sync runs, where the vectors go, its clock and chunk shapes.

    One per process (a driver's, a worker's): it holds the open store, so it is made
    where the steps run, never sent between them.
    """

    store: Batching
    embedder: Embedder
    extractor_for: ExtractorFor
    chunker: Chunker
    options: SyncOptions
    progress: Progress | None
    index: VectorIndex
    clock: Clock
    tally: Counter[ChunkShape] = field(default_factory=Counter)

    def count_chunk(self, chunk: Chunk) -> None:
        """Count ``chunk`` for the run's chunking diagnostics (its text is not kept)."""
        self.tally[shape_of(chunk)] += 1


@dataclass(frozen=True, slots=True)
class ReadJob:
    """A listed document the stat gate let through: to be read with ``derivation``
    (``old``: its stored version, if any)."""

    item: SourceItem
    old: StoredDocument | None
    derivation: str


@dataclass(frozen=True, slots=True)
class ObservedBatch:
    """What reading a batch of documents came to, in the order given: each observation with
    the stored document it replaces; what reading counted, and the shapes of the chunks."""

    observations: tuple[tuple[Observation, StoredDocument | None], ...]
    tally: SourceTally
    shapes: Counter[ChunkShape]


@dataclass(frozen=True, slots=True)
class Decision:
    """What needs every document of a source, decided once before any batch is planned:
    the boilerplate left out of the index (``skip``) and the boilerplate a change report
    leaves out of its similarity (``shared``: the same, unless boilerplate is indexed),
    whether it is the boilerplate the store had (``same_boilerplate``), whether every
    stored chunk had its vector (``embedded``), and how a replaced text is taken."""

    skip: frozenset[str] = frozenset()
    shared: frozenset[str] = frozenset()
    same_boilerplate: bool = True
    embedded: bool = False
    accept_replacements: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data that :meth:`from_dict` reads back (what the workers are told)."""
        return {"skip": sorted(self.skip), "shared": sorted(self.shared),
                "same_boilerplate": self.same_boilerplate, "embedded": self.embedded,
                "accept_replacements": self.accept_replacements}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        return cls(frozenset(data.get("skip", ())), frozenset(data.get("shared", ())),
                   bool(data.get("same_boilerplate", True)), bool(data.get("embedded", False)),
                   bool(data.get("accept_replacements", False)))


def shapes_data(shapes: Mapping[ChunkShape, int]) -> list[list[Any]]:
    """Chunk shapes and their counts as JSON-ready data (:func:`shapes_of_data` reads it)."""
    return [[*shape, n] for shape, n in shapes.items()]


def shapes_of_data(data: Iterable[list[Any]]) -> Counter[ChunkShape]:
    return Counter({(int(t), Boundary(b), bool(s)): int(n) for t, b, s, n in data})
