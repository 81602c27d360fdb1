"""An external vector store held in memory."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from kbsync.vectors import Payload, SinkHit, SinkPoint, VectorPoint

__all__ = ["MemorySink"]


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
