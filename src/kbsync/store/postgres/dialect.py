"""PostgreSQL's dialect of the SQL core: ``%s`` marks, lists as arrays, sets of rows unnested
from arrays, writes pipelined."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kbsync.store.sql.dialect import Column, Dialect, Row

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresDialect", "translated"]

# A quoted literal or identifier (kept as it is), a mark, or a percent sign.
_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?|%")


@functools.lru_cache(maxsize=512)
def translated(sql: str) -> str:
    """``sql`` with ``?`` marks as psycopg's ``%s`` (and a percent sign doubled)."""
    return _TOKENS.sub(lambda m: {"?": "%s", "%": "%%"}.get(m.group(), m.group()), sql)


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _arrays(columns: Sequence[Column], rows: Sequence[Row]) -> list[list[Any]]:
    """The values of each column of ``rows``, as the arrays :meth:`PostgresDialect.each`
    unnests."""
    return [list(column) for column in zip(*rows, strict=True)] if rows \
        else [[] for _ in columns]


class PostgresDialect(Dialect):
    """The SQL core's statements on one ``psycopg`` connection.

    A set of rows is bound as one array per column and unnested, one statement for
    any number of rows. Inside :meth:`pipeline` a write is sent without waiting for
    the server, and its rows are counted once it has answered (:meth:`flush`).
    """

    list_limit = 5000

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._changes = 0
        self._queued: list[psycopg.Cursor[Any]] = []
        self._pipelined = 0

    def sql(self, text: str) -> str:
        return translated(text)

    def any_of(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        for i in range(0, len(values), self.list_limit):
            yield f"{column} = ANY(?)", (list(values[i : i + self.list_limit]),)

    def each(self, columns: Sequence[Column]) -> str:
        arrays = ", ".join(f"?::{kind}[]" for _, kind in columns)
        return f"unnest({arrays}) AS u ({_quoted([n for n, _ in columns])})"

    def bind_each(self, columns: Sequence[Column], rows: Sequence[Row],
                  before: Sequence[Any] = (), after: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if not rows:
            return []
        return [(*before, *_arrays(columns, rows), *after)]

    def _rows(self, columns: Sequence[Column],
              rows: Sequence[Row]) -> tuple[str, tuple[Any, ...]]:
        """The relation ``u`` of ``rows`` and its arguments: one row of typed values (psycopg
        adapts an array parameter several times slower than a plain value, and one
        document's apply is the common case), or the rows unnested from arrays."""
        if len(rows) == 1:
            named = ", ".join(f'?::{kind} AS "{name}"' for name, kind in columns)
            return f"(SELECT {named}) AS u", tuple(rows[0])
        return self.each(columns), tuple(_arrays(columns, rows))

    def insert(self, table: str, columns: Sequence[Column], rows: Sequence[Row], *,
               conflict: str = "", order: str = "", source: str = "",
               document: Sequence[tuple[str, str]] = ()) -> None:
        if not rows:
            return
        names = [n for n, _ in columns]
        relation, args = self._rows(columns, rows)
        if document:
            # Joined with the documents by key: no statement waits for their ids.
            target = [t for t, _ in document] + names[1:]
            picked = [f"d.{c}" for _, c in document] + [f'u."{n}"' for n in names[1:]]
            # The documents named first (an index scan of their keys): joined only by
            # key, the planner may hash the rows and scan every document of the source.
            sql = (f"INSERT INTO {table} ({_quoted(target)}) SELECT {', '.join(picked)} "
                   f"FROM documents d, {relation} WHERE d.source = ? AND d.key = ANY(?) "
                   "AND d.key = u.key")
            args = (*args, source, sorted({row[0] for row in rows}))
        else:
            sql = f"INSERT INTO {table} ({_quoted(names)}) SELECT * FROM {relation}"
        if order and len(rows) > 1:
            sql += f' ORDER BY u."{order}"'
        self.send(f"{sql} {conflict}", args)

    def update_documents(self, source: str, columns: Sequence[Column], rows: Sequence[Row],
                         also: str = "", also_args: Sequence[Any] = ()) -> None:
        if not rows:
            return
        relation, args = self._rows(columns, rows)
        sets = ", ".join([f'"{n}" = u."{n}"' for n, _ in columns[1:]] + ([also] if also else []))
        self.send(f"UPDATE documents SET {sets} FROM {relation} WHERE documents.source = ? "
                  "AND documents.key = ANY(?) AND documents.key = u.key",
                  (*also_args, *args, source, [row[0] for row in rows]))

    def starts_with(self, column: str, prefix: str) -> tuple[str, tuple[Any, ...]]:
        return f"starts_with({column}, ?)", (prefix,)

    def contains(self, column: str) -> str:
        return f"strpos({column}, ?) > 0"

    def binary(self, column: str) -> str:
        return f'{column} COLLATE "C"'

    def vector_size(self, column: str) -> str:
        return f"vector_dims({column})"

    def vector(self, vector: npt.NDArray[np.float32]) -> Any:
        return vector

    def array(self, stored: Any) -> npt.NDArray[np.float32]:
        return np.asarray(stored.to_numpy(), dtype=np.float32)

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return self.conn.execute(translated(sql), args).fetchall()

    def stream(self, sql: str, args: Sequence[Any] = ()) -> Iterator[Row]:
        # Row by row from the server, not the whole result in the client first.
        yield from self.conn.cursor().stream(translated(sql), args)

    def write(self, sql: str, args: Sequence[Any] = ()) -> int:
        count = self.conn.execute(translated(sql), args).rowcount
        self.count(count)
        return int(count)

    def returning(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        cur = self.conn.execute(translated(sql), args)
        row = cur.fetchone()
        self.count(cur.rowcount)
        return row

    def send(self, sql: str, args: Sequence[Any] = ()) -> None:
        cur = self.conn.cursor()
        cur.execute(translated(sql), args)
        self.sent(cur)

    def send_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if not rows:
            return
        cur = self.conn.cursor()
        # One statement per row, but pipelined (executemany in a pipeline waits once).
        cur.executemany(translated(sql), rows)
        self.sent(cur)

    def sent(self, cur: psycopg.Cursor[Any]) -> None:
        """Count the rows of a write sent on ``cur`` (in a pipeline, once it has answered)."""
        if self._pipelined:
            self._queued.append(cur)  # its count arrives with the pipeline's results
        else:
            self.count(cur.rowcount)

    def count(self, rows: int) -> None:
        """Count ``rows`` written (a count of -1, unknown, as none)."""
        self._changes += max(rows, 0)

    def flush(self) -> None:
        """Count the rows of the writes sent in a pipeline (their results have arrived)."""
        for cur in self._queued:
            self.count(cur.rowcount)
        self._queued.clear()

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """Statements sent together, the server waited for once; their rows counted after.

        Inside a pipeline already (a worker's claimed batch) it is the same one: a nested
        pipeline of the driver would sync, a wait for the server per document.
        """
        self._pipelined += 1
        try:
            if self._pipelined > 1:
                yield
            else:
                with self.conn.pipeline():
                    yield
        finally:
            self._pipelined -= 1
        if not self._pipelined:
            self.flush()

    @property
    def changes(self) -> int:
        if not self._pipelined:
            self.flush()
        return self._changes

    def begin(self) -> None:
        self.conn.execute("BEGIN")

    def begin_snapshot(self) -> None:
        # Read committed, the default, takes a new snapshot for each statement.
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")
