"""Qdrant as a vector sink: an embedded local folder or a server (extra ``qdrant``)."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kbsync.errors import ConfigError, DependencyMissingError
from kbsync.vectors import Payload, SinkHit, SinkPoint, VectorPoint

__all__ = ["QdrantSink"]

_BATCH = 256


class QdrantSink:
    """A :class:`~kbsync.vectors.VectorSink` over one Qdrant collection (cosine distance).

    ``path`` opens Qdrant's local mode (a folder, one process at a time); ``url``
    a server, with the API key read from the environment variable ``api_key_env``.
    """

    def __init__(self, *, path: str | Path | None = None, url: str | None = None,
                 collection: str = "kbsync", api_key_env: str | None = None) -> None:
        try:
            from qdrant_client import QdrantClient, models
        except ImportError as exc:
            raise DependencyMissingError("the Qdrant vector sink", "qdrant",
                                         "qdrant-client", exc) from exc
        if (path is None) == (url is None):
            raise ConfigError("[vectors] qdrant needs exactly one of `path` or `url`")
        api_key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and api_key is None:
            raise ConfigError(f"[vectors] the environment variable {api_key_env} is not set")
        self._models = models
        self._client = (QdrantClient(path=str(path)) if path is not None
                        else QdrantClient(url=url, api_key=api_key))
        self.collection = collection

    @property
    def dimension(self) -> int | None:
        if not self._client.collection_exists(self.collection):
            return None
        vectors = self._client.get_collection(self.collection).config.params.vectors
        size = getattr(vectors, "size", None)  # a named-vectors collection is not ours
        return None if size is None else int(size)

    def reset(self, dimension: int) -> None:
        if self._client.collection_exists(self.collection):
            self._client.delete_collection(self.collection)
        self._client.create_collection(
            self.collection,
            vectors_config=self._models.VectorParams(size=dimension,
                                                     distance=self._models.Distance.COSINE))

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        for start in range(0, len(points), _BATCH):
            self._client.upsert(self.collection, points=[
                self._models.PointStruct(id=p.id, vector=p.vector.astype(np.float32).tolist(),
                                         payload=p.payload.as_dict())
                for p in points[start : start + _BATCH]])

    def delete(self, ids: Collection[str]) -> None:
        wanted = list(ids)
        for start in range(0, len(wanted), _BATCH):
            self._client.delete(self.collection, points_selector=self._models.PointIdsList(
                points=list(wanted[start : start + _BATCH])))

    def scan(self) -> Iterator[SinkPoint]:
        dimension = self.dimension
        if dimension is None:
            return
        offset: Any = None
        while True:
            records, offset = self._client.scroll(self.collection, limit=_BATCH, offset=offset,
                                                  with_payload=True, with_vectors=False)
            for r in records:
                yield SinkPoint(str(r.id), _payload(r.payload), dimension)
            if offset is None:
                return

    def search(self, vector: npt.NDArray[np.float32], k: int,
               ids: Collection[str] | None = None) -> list[SinkHit]:
        if self.dimension is None or (ids is not None and not ids):
            return []
        # Qdrant applies a has-id condition during the search itself (no top-k, then filtered).
        where = None if ids is None else self._models.Filter(
            must=[self._models.HasIdCondition(has_id=list(ids))])
        found = self._client.query_points(self.collection, query=vector.astype(np.float32).tolist(),
                                          query_filter=where, limit=k, with_payload=True).points
        return [SinkHit(str(p.id), _payload(p.payload), float(p.score)) for p in found]

    def close(self) -> None:
        self._client.close()


def _payload(data: dict[str, Any] | None) -> Payload | None:
    try:
        return Payload.from_dict(data or {})
    except (KeyError, TypeError, ValueError):
        return None
