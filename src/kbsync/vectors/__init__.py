"""External vector stores ("sinks"): a mirror of the current chunks' vectors outside the store.

The record store stays the source of truth; a sink holds one point per indexed
current chunk, under a deterministic id (:func:`kbsync.core.identity.vector_id`), so
writing a point twice is harmless and the sink can always be reconciled
against the records.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # a configuration that names a sink loads no NumPy
    import numpy as np
    import numpy.typing as npt

__all__ = ["Payload", "SinkHit", "SinkPoint", "VectorPoint", "VectorSink"]


@dataclass(frozen=True, slots=True)
class Payload:
    """What a point carries besides its vector: where its chunk is, and whose vector it is."""

    source: str
    key: str
    index: int
    digest: str
    heading: str | None
    start: int
    end: int
    embedder: str

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "key": self.key, "index": self.index,
                "digest": self.digest, "heading": self.heading, "start": self.start,
                "end": self.end, "embedder": self.embedder}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Payload:
        """The payload of a stored point; a point not written by kbsync raises ``KeyError``."""
        heading = data.get("heading")
        return cls(str(data["source"]), str(data["key"]), int(data["index"]),
                   str(data["digest"]), None if heading is None else str(heading),
                   int(data["start"]), int(data["end"]), str(data["embedder"]))


@dataclass(frozen=True, slots=True)
class VectorPoint:
    """A point to write: its id, its vector and its payload."""

    id: str
    vector: npt.NDArray[np.float32]
    payload: Payload


@dataclass(frozen=True, slots=True)
class SinkPoint:
    """A point as a scan of the sink returns it: no vector, only its size.

    ``payload`` is ``None`` for a point whose payload kbsync cannot read (not its own).
    """

    id: str
    payload: Payload | None
    dimension: int


@dataclass(frozen=True, slots=True)
class SinkHit:
    """One nearest neighbour: the point's id, its payload and its cosine similarity."""

    id: str
    payload: Payload | None
    score: float


@runtime_checkable
class VectorSink(Protocol):
    """A vector store outside the record database, holding one collection of points.

    Every operation is idempotent: upserting a point that exists replaces it,
    deleting an id that is absent does nothing.
    """

    @property
    def dimension(self) -> int | None:
        """The size of the collection's vectors; ``None`` while it does not exist."""
        ...

    def reset(self, dimension: int) -> None:
        """Drop the collection (if any) and create it empty for vectors of ``dimension``."""
        ...

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        ...

    def delete(self, ids: Collection[str]) -> None:
        ...

    def scan(self) -> Iterator[SinkPoint]:
        """Every point of the collection (for reconciliation)."""
        ...

    def search(self, vector: npt.NDArray[np.float32], k: int,
               ids: Collection[str] | None = None) -> list[SinkHit]:
        """The ``k`` points most similar to ``vector`` (cosine), best first; only among
        the points ``ids`` when given (a filtered search: the sink filters, then ranks)."""
        ...

    def close(self) -> None:
        ...
