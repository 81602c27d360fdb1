"""In-memory fakes of kbsync's protocols, public so users can test their setups too."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from kbsync.embed import Vectors
from kbsync.embed.hashing import HashingEmbedder
from kbsync.errors import DocumentError
from kbsync.identity import source_bytes_hash
from kbsync.model import ItemError, KnownItem, Listing, SourceItem, SourceStat, Validators
from kbsync.vectors import Payload, SinkHit, SinkPoint, VectorPoint

__all__ = ["CountingEmbedder", "MemorySink", "MemorySource"]


class MemorySource:
    """A source whose documents live in a dict of key -> bytes (or None to fail reading).

    The stat of a document is derived from its content, so an edit changes it
    and an unchanged document keeps it; ``complete=False`` simulates a partial listing.
    """

    def __init__(self, documents: Mapping[str, bytes | None] | None = None,
                 name: str = "memory", media_type: str = "text/plain", *,
                 http: bool = False) -> None:
        self.documents: dict[str, bytes | None] = dict(documents or {})
        self._name = name
        self.media_type = media_type
        self.complete = True
        self.http = http
        self.errors: dict[str, ItemError] = {}
        self.reads: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """Items with a content-derived stat; with ``http=True``, ETags and 304 answers instead."""
        known = known or {}
        items = []
        for key, data in sorted(self.documents.items()):
            if key in self.errors:
                continue
            payload = data or b""
            tag = source_bytes_hash(payload)[:12]
            if self.http:
                validators = Validators(etag=f'"{tag}"')
                seen = known.get(key)
                items.append(SourceItem(key, f"memory:{key}", self.media_type, None, validators,
                                        not_modified=seen is not None
                                        and seen.validators == validators))
            else:
                items.append(SourceItem(key, f"memory:{key}", self.media_type,
                                        SourceStat(len(payload), int(tag, 16), 1)))
        return Listing(tuple(items), complete=self.complete, errors=tuple(self.errors.values()))

    def read(self, item: SourceItem) -> bytes:
        self.reads.append(item.key)
        data = self.documents.get(item.key)
        if data is None:
            raise DocumentError(item.locator, "cannot be read (simulated)")
        return data


class CountingEmbedder:
    """The hashing embedder, counting texts embedded; can be told to fail on some texts,
    and to have an input ``window`` (in its tokens) that longer texts are truncated to."""

    def __init__(self, dimension: int = 64, fail_on: Sequence[str] = (),
                 window: int | None = None) -> None:
        self._inner = HashingEmbedder(dimension)
        self.window = window
        self.fail_on = list(fail_on)
        self.calls = 0
        self.texts = 0

    @property
    def identity(self) -> str:
        return self._inner.identity

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def max_input_tokens(self) -> int | None:
        return self.window

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._inner.count_tokens(texts)

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        for text in texts:
            if any(marker in text for marker in self.fail_on):
                raise RuntimeError("embedding provider failed (simulated)")
        self.texts += len(texts)
        out: Vectors = self._inner.embed(texts).astype(np.float32)
        return out


class MemorySink:
    """A vector sink in a dict, recording every write; can be told to fail.

    ``fail_keys``: an upsert carrying a point of one of these document keys raises,
    as an unreachable server would. ``upserted`` and ``deleted`` list every id written.
    """

    def __init__(self) -> None:
        self.points: dict[str, tuple[npt.NDArray[np.float32], Payload]] = {}
        self._dimension: int | None = None
        self.fail_keys: set[str] = set()
        self.upserted: list[str] = []
        self.deleted: list[str] = []
        self.resets = 0

    @property
    def writes(self) -> int:
        """Points written or deleted so far (a no-op sync leaves it unchanged)."""
        return len(self.upserted) + len(self.deleted) + self.resets

    @property
    def dimension(self) -> int | None:
        return self._dimension

    def reset(self, dimension: int) -> None:
        self.points.clear()
        self._dimension = dimension
        self.resets += 1

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        if self._dimension is None:
            raise RuntimeError("no collection: reset() first")
        if any(p.payload.key in self.fail_keys for p in points):
            raise ConnectionError("vector store unreachable (simulated)")
        for p in points:
            if p.vector.shape != (self._dimension,):
                raise ValueError(f"vector of shape {p.vector.shape} in a {self._dimension}-d "
                                 "collection")
            self.points[p.id] = (np.asarray(p.vector, dtype=np.float32), p.payload)
            self.upserted.append(p.id)

    def delete(self, ids: Collection[str]) -> None:
        for i in ids:
            self.points.pop(i, None)
            self.deleted.append(i)

    def scan(self) -> Iterator[SinkPoint]:
        for i, (vector, payload) in list(self.points.items()):
            yield SinkPoint(i, payload, int(vector.shape[0]))

    def search(self, vector: npt.NDArray[np.float32], k: int,
               ids: Collection[str] | None = None) -> list[SinkHit]:
        if ids is not None:
            wanted = set(ids)
            ids = [i for i in self.points if i in wanted]
        else:
            ids = list(self.points)
        if not ids:
            return []
        matrix = np.vstack([self.points[i][0] for i in ids])
        norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(vector))
        scores = (matrix @ vector) / np.where(norms == 0, 1.0, norms)
        order = np.argsort(-scores, kind="stable")[:k]
        return [SinkHit(ids[n], self.points[ids[n]][1], float(scores[n])) for n in order.tolist()]

    def close(self) -> None:
        """Nothing to release."""
