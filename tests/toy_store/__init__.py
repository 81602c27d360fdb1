"""A toy store kind built on the SQL core: what a new SQL backend takes, and no more.

Its dialect is Python's ``sqlite3`` spoken differently from kbsync's SQLite store:
numbered marks (``?1``, ``?2``), vectors kept as JSON text, lists bound as plain ``IN``
lists, no FTS5, no big-text blobs. Its schema is the core's logical one; its search is
a plain scan of the current chunks. Registered with one line:
``STORE_KINDS["toy"] = ToyKind()``.
"""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from kbsync.errors import StoreError
from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import ChunkRef, Hit, Nearest, RecordStore, Window
from kbsync.store.filters import Filters, matches
from kbsync.store.guard import guarded, sqlite_or_os_error
from kbsync.store.kinds import Capabilities, Rebuilding, WriterLockLike
from kbsync.store.lock import WriterLock
from kbsync.store.rows import CURRENT, INDEXED, as_hit, query_terms, window_span
from kbsync.store.sql import Dialect, Row, SqlStore
from kbsync.store.sql.schema import create_statements

T = TypeVar("T")

__all__ = ["ToyDialect", "ToyKind", "ToySettings", "ToyStore"]


class ToyDialect(Dialect):
    """``sqlite3`` with numbered marks and JSON vectors; lists, sets of rows and transactions
    as the core's defaults have them."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def sql(self, text: str) -> str:
        number = itertools.count(1)
        return re.sub(r"'[^']*'|\?", lambda m: m.group() if m.group() != "?"
                      else f"?{next(number)}", text)

    def vector_size(self, column: str) -> str:
        return f"json_array_length({column})"

    def vector(self, vector: npt.NDArray[np.float32]) -> Any:
        return json.dumps(vector.tolist())

    def array(self, stored: Any) -> npt.NDArray[np.float32]:
        return np.asarray(json.loads(stored), dtype=np.float32)

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return self.conn.execute(self.sql(sql), args).fetchall()

    def stream(self, sql: str, args: Sequence[Any] = ()) -> Iterator[Row]:
        yield from self.conn.execute(self.sql(sql), args)

    def write(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self.conn.execute(self.sql(sql), args).rowcount

    def returning(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        return next(iter(self.rows(sql, args)), None)

    def send_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(self.sql(sql), rows)

    @property
    def changes(self) -> int:
        return self.conn.total_changes

    def rollback(self) -> None:
        if self.conn.in_transaction:  # SQLite may have rolled back already
            self.conn.execute("ROLLBACK")


_CHUNKS = ("SELECT d.source, d.key, d.title, c.heading, c.idx, c.start, c.\"end\", c.digest, "
           "t.text, c.tokens, d.metadata FROM documents d JOIN chunks c ON " + CURRENT +
           " JOIN chunk_texts t ON t.digest = c.digest WHERE " + INDEXED)


@guarded(lambda store: str(store.path), sqlite_or_os_error)
class ToyStore(SqlStore):
    """The SQL core over :class:`ToyDialect`, with a search that scans."""

    _dialect: ToyDialect

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        self._dialect = ToyDialect(conn)
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchall():
            with self._transaction():
                for statement in create_statements():
                    conn.execute(statement)

    def close(self) -> None:
        self._dialect.conn.close()

    def check_pages(self) -> str | None:
        return None  # no page check cheap enough to run before a sync

    def repair(self, rechunk: Callable[[str], Mapping[str, str]]) -> list[str]:
        self._dialect.conn.execute("REINDEX")
        return ["rebuilt the indexes"]

    def _scan(self, filters: Filters | None = None, where: str = "",
              args: Sequence[Any] = ()) -> Iterator[Row]:
        """The current, indexed chunks (of documents meeting ``filters``), in order."""
        for row in self._dialect.stream(f"{_CHUNKS}{where} ORDER BY d.source, d.key, c.idx",
                                        args):
            metadata = json.loads(row[10] or "{}")
            if filters is None or matches(filters, row[0], row[1], metadata, row[2]):
                yield row

    def search_text(self, query: str, k: int, filters: Filters | None = None) -> list[Hit]:
        terms = query_terms(query)
        hits = []
        for row in self._scan(filters):
            body = Counter(re.findall(r"\w+", row[8].lower()))
            head = Counter(re.findall(r"\w+", f"{row[2] or ''} {row[3] or ''}".lower()))
            if score := sum(body[t] + 2 * head[t] for t in terms):
                hits.append(as_hit(row, float(score)))
        return sorted(hits, key=lambda h: -h.score)[:k]

    def search_vector(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                      filters: Filters | None = None, norm: VectorNorm | None = None,
                      ) -> Nearest:
        rows = list(self._scan(filters))
        stored = self.vectors(embedder, {r[7] for r in rows})
        rows = [r for r in rows if r[7] in stored]
        if not rows:
            return Nearest([])
        matrix = np.vstack([stored[r[7]] for r in rows])
        wrong = (norm or ANY_NORM).unsound(np.linalg.norm(matrix.astype(np.float64), axis=1))
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        best = [n for n in np.argsort(-scores, kind="stable").tolist() if not wrong[n]][:k]
        return Nearest([as_hit(rows[n], float(scores[n])) for n in best], int(wrong.sum()))

    def hits_at(self, refs: Sequence[tuple[str, str, int, str]],
                scores: Sequence[float]) -> list[Hit]:
        out = []
        for (source, key, index, digest), score in zip(refs, scores, strict=True):
            out += [as_hit(r, score) for r in self._scan(
                where=" AND d.source = ? AND d.key = ? AND c.idx = ? AND c.digest = ?",
                args=(source, key, index, digest))]
        return out

    def window(self, hit: Hit, budget: int, taken: Collection[int] = ()) -> Window:
        rows = self._dialect.rows(
            f"SELECT c.idx, c.start, c.\"end\", c.tokens, c.section FROM documents d JOIN chunks "
            f"c ON {CURRENT} WHERE d.source = ? AND d.key = ? ORDER BY c.idx",
            (hit.source, hit.key))
        span = window_span(rows, hit.index, budget, taken)
        doc = self.document(hit.key, hit.source, previous=False)
        if span is None or doc is None:
            return Window(hit.index, hit.index, hit.text, 0)
        first, last, tokens = span
        return Window(first, last, doc.text[rows[first][1]:rows[last][2]], tokens)

    def indexed_chunks(self, source: str | None = None, key: str | None = None,
                       filters: Filters | None = None) -> Iterator[ChunkRef]:
        for r in list(self._scan(filters)):
            if source in (None, r[0]) and key in (None, r[1]):
                yield ChunkRef(r[0], r[1], r[4], r[7], r[3], r[5], r[6])


@dataclass(frozen=True, slots=True)
class ToySettings:
    """The ``[store]`` table of a toy store: its file, relative to ``kbsync.toml``."""

    path: str = ".kbsync/toy.db"


class ToyKind:
    """The toy store as a store kind (:class:`~kbsync.store.kinds.StoreKind`)."""

    name = "toy"
    settings_type = ToySettings
    capabilities = Capabilities()

    def open(self, settings: ToySettings, root: Path, *, create: bool) -> ToyStore:
        path = root / settings.path
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        return ToyStore(path if create or path.exists() else ":memory:")

    def open_status(self, settings: ToySettings, root: Path) -> ToyStore:
        return self.open(settings, root, create=False)  # no quicker read of its own

    def exists(self, settings: ToySettings, root: Path) -> bool:
        return (root / settings.path).exists()

    def writer_lock(self, settings: ToySettings, root: Path, *, wait: bool,
                    on_wait: Callable[[str], None] | None) -> WriterLockLike:
        path = root / settings.path
        return WriterLock(path.with_name(path.name + ".lock"), wait=wait, on_wait=on_wait)

    def state_dir(self, settings: ToySettings, root: Path) -> Path:
        return (root / settings.path).parent

    def describe(self, settings: ToySettings, root: Path) -> str:
        return str(root / settings.path)

    def tidy(self, settings: ToySettings, root: Path) -> None:
        return None  # it has no rebuild to leave anything behind

    def rebuild(self, settings: ToySettings, root: Path, old: RecordStore,
                fill: Callable[[RecordStore], T]) -> Rebuilding[T]:
        raise StoreError("the toy store cannot be rebuilt")
