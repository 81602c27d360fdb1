"""LanceDB as a vector sink: an embedded table in a folder (extra ``lancedb``)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kbsync.errors import DependencyMissingError
from kbsync.vectors import Payload, SinkHit, SinkPoint, VectorPoint

__all__ = ["LanceDBSink"]

_BATCH = 1024
# What a point id of kbsync looks like (identity.vector_id): safe to quote into a filter.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_FIELDS = ("source", "key", "index", "digest", "heading", "start", "end", "embedder")


class LanceDBSink:
    """A :class:`~kbsync.vectors.VectorSink` over one LanceDB table (exact cosine search).

    The payload is kept as columns, so the table can be queried with LanceDB's
    own filters as well.
    """

    def __init__(self, *, path: str | Path, table: str = "kbsync") -> None:
        try:
            import lancedb
            import pyarrow
        except ImportError as exc:
            raise DependencyMissingError("the LanceDB vector sink", "lancedb", "lancedb",
                                         exc) from exc
        self._pa = pyarrow
        self._db = lancedb.connect(str(path))
        self.table = table

    def _table(self) -> Any | None:
        try:
            return self._db.open_table(self.table)
        except ValueError:  # LanceDB's answer for a table that does not exist
            return None

    @property
    def dimension(self) -> int | None:
        table = self._table()
        if table is None:
            return None
        return int(table.schema.field("vector").type.list_size)

    def reset(self, dimension: int) -> None:
        pa = self._pa
        if self._table() is not None:
            self._db.drop_table(self.table)
        schema = pa.schema([
            pa.field("id", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
            pa.field("source", pa.string()), pa.field("key", pa.string()),
            pa.field("index", pa.int64()), pa.field("digest", pa.string()),
            pa.field("heading", pa.string()), pa.field("start", pa.int64()),
            pa.field("end", pa.int64()), pa.field("embedder", pa.string()),
        ])
        self._db.create_table(self.table, schema=schema)

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        table = self._required()
        for start in range(0, len(points), _BATCH):
            rows = [{"id": p.id, "vector": p.vector.astype(np.float32), **p.payload.as_dict()}
                    for p in points[start : start + _BATCH]]
            (table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
             .execute(rows))

    def delete(self, ids: Collection[str]) -> None:
        table = self._table()
        if table is None:
            return
        wanted = list(ids)
        for start in range(0, len(wanted), _BATCH):
            # Ids are kbsync's UUID strings; quotes are doubled all the same.
            quoted = ", ".join("'" + i.replace("'", "''") + "'"
                               for i in wanted[start : start + _BATCH])
            table.delete(f"id IN ({quoted})")

    def scan(self) -> Iterator[SinkPoint]:
        table = self._table()
        if table is None:
            return
        dimension = int(table.schema.field("vector").type.list_size)
        for row in table.to_arrow().select(["id", *_FIELDS]).to_pylist():
            yield SinkPoint(str(row["id"]), _payload(row), dimension)

    def search(self, vector: npt.NDArray[np.float32], k: int,
               ids: Collection[str] | None = None) -> list[SinkHit]:
        table = self._table()
        if table is None or (ids is not None and not ids):
            return []
        query = table.search(vector.astype(np.float32)).distance_type("cosine").limit(k)
        if ids is not None:
            # A prefilter: LanceDB restricts the rows first, then ranks them. Point ids are
            # kbsync's UUIDs; anything else is no id of ours and is left out, not quoted.
            allowed = [i for i in ids if _UUID.fullmatch(i)]
            if not allowed:
                return []
            query = query.where("id IN (" + ", ".join(f"'{i}'" for i in allowed) + ")",
                                prefilter=True)
        rows = query.select(["id", *_FIELDS, "_distance"]).to_list()
        # LanceDB reports the cosine distance; kbsync scores are similarities.
        return [SinkHit(str(r["id"]), _payload(r), 1.0 - float(r["_distance"])) for r in rows]

    def _required(self) -> Any:
        table = self._table()
        if table is None:
            raise RuntimeError(f"the LanceDB table {self.table!r} does not exist yet")
        return table

    def close(self) -> None:
        """Nothing to release: LanceDB keeps no open handle between calls."""


def _payload(row: dict[str, Any]) -> Payload | None:
    try:
        return Payload.from_dict(row)
    except (KeyError, TypeError, ValueError):
        return None
