"""What differs between SQL databases in the statements the SQL core writes once.

The core's statements are written with ``?`` for each value and run through a
:class:`Dialect`: it turns them into its driver's form, binds a list of values
(``IN``, ``= ANY``) and a set of rows (one execution per row of a prepared statement,
or arrays unnested into one statement), encodes vectors, streams rows, counts what was
written and runs transactions. The rest of SQL the core uses is the same in SQLite and
PostgreSQL (``ON CONFLICT ... DO UPDATE/NOTHING``, ``RETURNING``, ``UPDATE ... FROM``,
row values), and the lock order is the core's own: shared rows are written sorted, so
concurrent writers never wait on each other in a cycle.

The defaults are those of a database that binds one row at a time (SQLite): a new
dialect overrides what its database does otherwise.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # NumPy is imported where vectors are read or written
    import numpy as np
    import numpy.typing as npt


__all__ = ["Column", "Dialect", "Row"]

Row = Sequence[Any]
"""A row as a driver returns it, or as a set of rows binds it."""

Column = tuple[str, str]
"""A column of a set of rows bound at once: its name and its SQL type (``text``, ``bigint``,
``integer``, ``boolean``, ``bytea``, ``double precision``), which a database that binds
arrays needs to type them."""


def _names(names: Iterable[str], prefix: str = "") -> str:
    return ", ".join(f'{prefix}"{name}"' for name in names)


@functools.lru_cache(maxsize=64)
def _insert_sql(table: str, columns: tuple[Column, ...], document: tuple[tuple[str, str], ...],
                conflict: str) -> str:
    """The statement that inserts one row of ``columns`` (the first standing for the
    ``document`` columns, when given)."""
    names = [t for t, _ in document] + [n for n, _ in columns[1 if document else 0:]]
    marks = ", ".join("?" * len(names))
    return f"INSERT INTO {table} ({_names(names)}) VALUES ({marks}) {conflict}"


class Dialect(ABC):
    """One database's way with the statements of the SQL core, over one connection.

    A store makes one for its connection and keeps it: what it counts (rows written)
    and queues (writes sent without waiting) belong to that connection.
    """

    #: How many values of a list one statement binds at most (:meth:`any_of`).
    list_limit: int = 500

    # -- statements ----------------------------------------------------------------------

    def sql(self, text: str) -> str:
        """A statement written with ``?`` marks, as the driver takes it."""
        return text

    def any_of(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """Conditions that ``column`` is one of ``values``, each with its arguments: as
        many as the database needs to bind them all (none for no values)."""
        for i in range(0, len(values), self.list_limit):
            part = tuple(values[i : i + self.list_limit])
            yield f"{column} IN ({', '.join('?' * len(part))})", part

    def each(self, columns: Sequence[Column]) -> str:
        """A relation ``u`` with ``columns``, bound from the rows of :meth:`bind_each`: a FROM
        item for set-based statements, ``INSERT ... SELECT ... FROM {each} JOIN ...``."""
        return f"(SELECT {', '.join(f'? AS {_names([n])}' for n, _ in columns)}) AS u"

    def bind_each(self, columns: Sequence[Column], rows: Sequence[Row],
                  before: Sequence[Any] = (), after: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The arguments of a statement using :meth:`each` (``before`` and ``after`` are those
        of the marks before and after it), one tuple per execution."""
        return [(*before, *row, *after) for row in rows]

    def insert(self, table: str, columns: Sequence[Column], rows: Sequence[Row], *,
               conflict: str = "", order: str = "", source: str = "",
               document: Sequence[tuple[str, str]] = ()) -> None:
        """Insert ``rows`` of ``columns`` into ``table`` (sent, not waited for), then
        ``conflict`` (an ``ON CONFLICT`` clause); ``order`` names the column they are
        sorted by, the order they must be inserted in (rows shared by concurrent writers).

        With ``document``, the first column of each row is the key of a document of
        ``source``, which stands for that document's values: (table column, column of
        ``documents``) pairs, such as ``("doc_id", "id")``. A row of no document is left
        out.
        """
        if document:
            found = self._documents(source, [row[0] for row in rows], [c for _, c in document])
            rows = [(*found[row[0]], *row[1:]) for row in rows if row[0] in found]
        self.send_many(_insert_sql(table, tuple(columns), tuple(document), conflict), rows)

    def _documents(self, source: str, keys: Sequence[str],
                   wanted: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """The ``wanted`` columns of the documents of ``source`` at ``keys``, by key."""
        found = {}
        for listed, args in self.any_of("key", sorted(set(keys))):
            for row in self.rows(f"SELECT key, {', '.join(wanted)} FROM documents "
                                 f"WHERE source = ? AND {listed}", (source, *args)):
                found[row[0]] = tuple(row[1:])
        return found

    def update_documents(self, source: str, columns: Sequence[Column], rows: Sequence[Row],
                         also: str = "", also_args: Sequence[Any] = ()) -> None:
        """Set ``columns`` (after the first, the key) of the documents of ``source`` that
        ``rows`` name by key, and ``also`` (more assignments, with ``also_args``)."""
        sets = ", ".join([f"{_names([n])} = ?" for n, _ in columns[1:]] + ([also] if also else []))
        self.send_many(f"UPDATE documents SET {sets} WHERE source = ? AND key = ?",
                       [(*row[1:], *also_args, source, row[0]) for row in rows])

    def starts_with(self, column: str, prefix: str) -> tuple[str, tuple[Any, ...]]:
        """A condition that ``column`` starts with ``prefix``, with its arguments.

        A range in binary order by default, which a primary key answers: the database
        must compare text byte by byte there (SQLite's default; PostgreSQL's collation
        may not, and says it otherwise).
        """
        return f"{column} >= ? AND {column} < ?", (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1))

    def contains(self, column: str) -> str:
        """A condition that ``column`` holds the text bound to its one mark."""
        return f"instr({column}, ?) > 0"

    def binary(self, column: str) -> str:
        """``column`` ordered byte by byte, whatever the database's collation."""
        return column

    def as_text(self, column: str) -> str:
        """``column`` of a kept text read as text (SQLite may keep a big one as UTF-8 bytes)."""
        return column

    def as_bytes(self, column: str) -> str:
        """``column`` of a text read as bytes, so that a damaged one is read at all."""
        return column

    @abstractmethod
    def vector_size(self, column: str) -> str:
        """The number of values of the stored vector ``column``, in SQL."""

    # -- values --------------------------------------------------------------------------

    @abstractmethod
    def vector(self, vector: npt.NDArray[np.float32]) -> Any:
        """A vector as the database stores it."""

    @abstractmethod
    def array(self, stored: Any) -> npt.NDArray[np.float32]:
        """A stored vector as an array."""

    def vector_bytes(self, stored: Any) -> bytes:
        """A stored vector's values as float32 bytes, however many there are (verify reads
        a damaged one too)."""
        return self.array(stored).tobytes()

    # -- running statements --------------------------------------------------------------

    @abstractmethod
    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""

    def one(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or None."""
        found = self.rows(sql, args)
        return found[0] if found else None

    @abstractmethod
    def stream(self, sql: str, args: Sequence[Any] = ()) -> Iterator[Row]:
        """The rows of a query as the database hands them over, never all at once."""

    @abstractmethod
    def write(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run a write and wait for it; the rows it changed."""

    @abstractmethod
    def returning(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        """Run a write with a RETURNING clause and wait for it; its first row (or None),
        the rows it changed counted."""

    def send(self, sql: str, args: Sequence[Any] = ()) -> None:
        """Run a write whose count is not needed now (a database that pipelines does not
        wait for it)."""
        self.write(sql, args)

    @abstractmethod
    def send_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run a write once per row of arguments (executemany)."""

    @property
    @abstractmethod
    def changes(self) -> int:
        """Rows inserted, updated or deleted through this connection so far."""

    # -- transactions --------------------------------------------------------------------

    def begin(self) -> None:
        """Start a write transaction."""
        self.write("BEGIN")

    def begin_snapshot(self) -> None:
        """Start a transaction whose reads all see one committed state (a SQLite
        transaction always does), for checks that a commit meanwhile must not mislead."""
        self.begin()

    def commit(self) -> None:
        self.write("COMMIT")

    def rollback(self) -> None:
        self.write("ROLLBACK")
