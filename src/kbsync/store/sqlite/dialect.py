"""SQLite's dialect of the SQL core: ``?`` as written, lists as JSON arrays, rows one at a time."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from kbsync.store.sql.dialect import Dialect, Row

if TYPE_CHECKING:  # NumPy is imported where vectors are read or written
    import numpy as np
    import numpy.typing as npt

__all__ = ["SqliteDialect"]


class SqliteDialect(Dialect):
    """The SQL core's statements on one ``sqlite3`` connection (``conn``, which the store
    may replace: a repair opens the file again).

    A set of rows is bound one row per execution of a prepared statement (the
    :class:`~kbsync.store.sql.dialect.Dialect`'s defaults): in-process, an execution
    costs microseconds, and SQLite has no arrays to unnest.
    """

    list_limit = 500  # of the 32,766 marks a statement may have: few, for the statement cache

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def any_of(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        if len(values) == 1:
            yield f"{column} = ?", (values[0],)
        elif all(isinstance(v, str) for v in values) and values:
            # One statement for any number of texts: json_each unpacks the array.
            yield f"{column} IN (SELECT value FROM json_each(?))", (json.dumps(list(values)),)
        else:  # bytes have no JSON form
            yield from super().any_of(column, values)

    def as_text(self, column: str) -> str:
        return f"CAST({column} AS TEXT)"

    def as_bytes(self, column: str) -> str:
        return f"CAST({column} AS BLOB)"

    def vector_size(self, column: str) -> str:
        return f"(length({column}) / 4.0)"

    def vector(self, vector: npt.NDArray[np.float32]) -> Any:
        return vector.tobytes()

    def array(self, stored: Any) -> npt.NDArray[np.float32]:
        import numpy as np

        return np.frombuffer(stored, dtype=np.float32)

    def vector_bytes(self, stored: Any) -> bytes:
        return bytes(stored)

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return self.conn.execute(sql, args).fetchall()

    def stream(self, sql: str, args: Sequence[Any] = ()) -> Iterator[Row]:
        yield from self.conn.execute(sql, args)

    def write(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self.conn.execute(sql, args).rowcount

    def returning(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        found = self.conn.execute(sql, args).fetchall()
        return found[0] if found else None

    def send_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    @property
    def changes(self) -> int:
        return self.conn.total_changes

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self.conn.in_transaction:  # SQLite may have rolled back already (SQLITE_FULL)
            self.conn.execute("ROLLBACK")

