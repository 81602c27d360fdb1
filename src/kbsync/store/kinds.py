"""Store kinds: the one place that maps the ``[store]`` table to a record store.

A kind is a name, a frozen settings type (the table's keys, typed and checked before
anything runs, see :mod:`kbsync.settings`), what it can do (:class:`Capabilities`) and
how to open it, test for it and lock it. A new store backend is one folder and one
entry in :data:`STORE_KINDS`; the knowledge base asks the kind, never the class.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kbsync.errors import ConfigError, ParameterError, StoreError
from kbsync.settings import parse_settings, shown

if TYPE_CHECKING:  # a status reads its store's file without the roles of a store
    from kbsync.store import RecordStore, StatusReads

__all__ = [
    "STORE_KINDS",
    "Capabilities",
    "PostgresSettings",
    "Rebuilding",
    "SqliteSettings",
    "StoreConfig",
    "StoreKind",
    "WriterLockLike",
    "store_kind",
]

S = TypeVar("S")
T = TypeVar("T")


class WriterLockLike(AbstractContextManager[Any], Protocol):
    """One writer at a time: a context manager, and who holds it now (for ``status``)."""

    def holder(self) -> str | None:
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store kind can do beyond the :class:`~kbsync.store.RecordStore` protocol."""

    rebuild: bool = False
    """A fresh store can be built beside it and swapped in (``kbsync rebuild``)."""
    repair: bool = False
    """It can mend what it holds twice (indexes, full text) in place (``verify --repair``)."""
    workers: bool = False
    """Several processes or machines can sync into it at once (``--workers``)."""


@dataclass(frozen=True, slots=True)
class Rebuilding(Generic[T]):
    """What a rebuild made: what filling the fresh store returned, the vectors carried over
    from the old one, where the old one is kept, and the new store, open where it was."""

    value: T
    salvaged: int
    backup: Path
    store: RecordStore


@dataclass(frozen=True, slots=True)
class SqliteSettings:
    """One SQLite file (relative to ``kbsync.toml``), the embedded default, and the count
    of one embedder's chunks from which vector search asks an approximate index (the
    ``ann`` extra; 0: never) and re-scores its candidates exactly."""

    path: str = ".kbsync/kbsync.db"
    ann_above: int = 200_000  # kbsync.store.sqlite.ann.ANN_ABOVE

    def __post_init__(self) -> None:
        if not self.path:
            raise ParameterError("path must name the store's file")
        if self.ann_above < 0:
            raise ParameterError("ann_above must be 0 (never) or a count of chunks")


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """A PostgreSQL database: ``url`` (no password in it), the environment variable that
    holds the password (else libpq's pgpass or service file), a schema, and the memory an
    index is built with after a first load (``maintenance_work_mem``, "1GB"; empty: the
    server's, raised to what the build needs, up to 1 GB), and the count of one dimension's
    vectors above which their HNSW index is built at the end of a sync (0: never; below it
    a vector search compares every vector, exactly)."""

    url: str
    password_env: str = ""
    schema: str = ""
    index_memory: str = ""
    ann_above: int = 100_000  # kbsync.store.postgres.schema.ANN_ABOVE

    def __post_init__(self) -> None:
        if not self.url.startswith(("postgresql://", "postgres://")):
            raise ParameterError("url must be a postgresql:// URL")
        if re.match(r"^[a-z]+://[^/@]*:[^/@]+@", self.url):
            raise ParameterError("url must not hold a password: name an environment "
                                 "variable in password_env, or use a libpq service or "
                                 "pgpass file")
        if self.index_memory and not re.fullmatch(r"[1-9][0-9]*(kB|MB|GB|TB)",
                                                  self.index_memory):
            raise ParameterError('index_memory is an amount of memory such as "1GB" '
                                 "(kB, MB, GB or TB)")
        if self.ann_above < 0:
            raise ParameterError("ann_above must be 0 (never) or a count of vectors")

    def password(self) -> str | None:
        """The password from the variable ``password_env`` names (libpq's own without)."""
        if not self.password_env:
            return None
        password = os.environ.get(self.password_env)
        if password is None:
            raise ConfigError(f"[store] password_env names {self.password_env}, "
                              "which is not set")
        return password


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The ``[store]`` table as the file has it, checked when made: its kind (a ``url`` is
    PostgreSQL, else a SQLite file, unless ``kind`` says) and the kind's settings."""

    table: Mapping[str, Any] = field(default_factory=dict)
    kind: str = field(init=False)
    settings: Any = field(init=False)

    def __post_init__(self) -> None:
        name = self.table.get("kind", "postgres" if "url" in self.table else "sqlite")
        if not isinstance(name, str):
            raise ConfigError(f"[store] kind: expected a string, got {shown(name)}")
        kind = store_kind(name)
        settings = parse_settings({k: v for k, v in self.table.items() if k != "kind"},
                                  kind.settings_type, "[store]")
        object.__setattr__(self, "kind", kind.name)
        object.__setattr__(self, "settings", settings)


class StoreKind(Protocol[S]):
    """What kbsync needs to know of one kind of store."""

    name: str
    settings_type: type[S]
    capabilities: Capabilities

    def open(self, settings: S, root: Path, *, create: bool) -> RecordStore:
        """The store; without ``create`` a store that does not exist yet reads as an empty
        one in memory, so that reading a knowledge base never writes a file or a table."""
        ...

    def open_status(self, settings: S, root: Path) -> StatusReads:
        """The store opened for a status only (as :meth:`open` without ``create``): a kind
        may read it without opening the whole store, since a status runs often and must
        start at once."""
        ...

    def exists(self, settings: S, root: Path) -> bool:
        """Whether the store has been created."""
        ...

    def writer_lock(self, settings: S, root: Path, *, wait: bool,
                    on_wait: Callable[[str], None] | None) -> WriterLockLike:
        """The lock that lets one writer at a time write to this store."""
        ...

    def state_dir(self, settings: S, root: Path) -> Path:
        """The folder of the knowledge base's local state (scratch files, caches)."""
        ...

    def describe(self, settings: S, root: Path) -> str:
        """The store in a few words, for messages (a file's path, a URL)."""
        ...

    def tidy(self, settings: S, root: Path) -> None:
        """Remove what a killed rebuild left; called holding the writer lock, so no rebuild
        is running."""
        ...

    def rebuild(self, settings: S, root: Path, old: RecordStore,
                fill: Callable[[RecordStore], T]) -> Rebuilding[T]:
        """A fresh store, with the erasures and every readable vector of ``old``, filled by
        ``fill`` (a sync), then put in place of ``old`` (closed then), which is kept beside
        it. If ``fill`` fails, nothing is swapped and ``old`` stays open and as it was.
        StoreError for a kind that cannot (:attr:`Capabilities.rebuild`)."""
        ...


class _Sqlite:
    name = "sqlite"
    settings_type = SqliteSettings
    capabilities = Capabilities(rebuild=True, repair=True)

    def open(self, settings: SqliteSettings, root: Path, *, create: bool) -> RecordStore:
        from kbsync.store.sqlite import SqliteStore

        path = root / settings.path
        return SqliteStore(path if create or path.exists() else ":memory:",
                           ann_above=settings.ann_above)

    def open_status(self, settings: SqliteSettings, root: Path) -> StatusReads:
        from kbsync.store.sqlite.status import read_status_file

        found = read_status_file(root / settings.path)
        return found if found is not None else self.open(settings, root, create=False)

    def exists(self, settings: SqliteSettings, root: Path) -> bool:
        return (root / settings.path).exists()

    def writer_lock(self, settings: SqliteSettings, root: Path, *, wait: bool,
                    on_wait: Callable[[str], None] | None) -> WriterLockLike:
        from kbsync.store.lock import WriterLock

        path = root / settings.path
        return WriterLock(path.with_name(path.name + ".lock"), wait=wait, on_wait=on_wait)

    def state_dir(self, settings: SqliteSettings, root: Path) -> Path:
        return (root / settings.path).parent

    def describe(self, settings: SqliteSettings, root: Path) -> str:
        return str(root / settings.path)

    def tidy(self, settings: SqliteSettings, root: Path) -> None:
        from kbsync.store.sqlite import remove_rebuild_leftovers

        remove_rebuild_leftovers(root / settings.path)

    def rebuild(self, settings: SqliteSettings, root: Path, old: RecordStore,
                fill: Callable[[RecordStore], T]) -> Rebuilding[T]:
        from kbsync.store.sqlite import (
            SqliteStore,
            carry_erasures,
            rebuild_file,
            salvage_embeddings,
            swap_in,
        )

        live = root / settings.path
        fresh = rebuild_file(live)
        backup = live.with_name(live.name + ".before-rebuild")
        new = SqliteStore(fresh)
        try:
            carry_erasures(live, new)
            salvaged = salvage_embeddings(live, new)
            value = fill(new)
        except BaseException:
            new.close()
            fresh.unlink(missing_ok=True)
            raise
        new.close()
        old.close()
        swap_in(fresh, live, backup)
        store = SqliteStore(live, ann_above=settings.ann_above)
        store.remember_damage(None)  # the damage was the old file's
        return Rebuilding(value, salvaged, backup, store)


class _Postgres:
    name = "postgres"
    settings_type = PostgresSettings
    capabilities = Capabilities(workers=True)

    def open(self, settings: PostgresSettings, root: Path, *, create: bool) -> RecordStore:
        from kbsync.store.postgres import PostgresStore  # needs the `postgres` extra

        if create or self.exists(settings, root):
            return PostgresStore(settings.url, password=settings.password(),
                                 schema=settings.schema or None,
                                 index_memory=settings.index_memory or None,
                                 ann_above=settings.ann_above)
        from kbsync.store.sqlite import SqliteStore

        return SqliteStore(":memory:")

    def open_status(self, settings: PostgresSettings, root: Path) -> StatusReads:
        return self.open(settings, root, create=False)  # a database server: no quicker read

    def exists(self, settings: PostgresSettings, root: Path) -> bool:
        from kbsync.store.postgres import PostgresStore

        return PostgresStore.exists(settings.url, password=settings.password(),
                                    schema=settings.schema or None)

    def writer_lock(self, settings: PostgresSettings, root: Path, *, wait: bool,
                    on_wait: Callable[[str], None] | None) -> WriterLockLike:
        # An advisory lock held by its own connection: writers may run on several machines.
        from kbsync.store.postgres import AdvisoryLock

        return AdvisoryLock(settings.url, settings.password(), settings.schema or None,
                            wait=wait, on_wait=on_wait)

    def state_dir(self, settings: PostgresSettings, root: Path) -> Path:
        return root / ".kbsync"

    def describe(self, settings: PostgresSettings, root: Path) -> str:
        return settings.url

    def tidy(self, settings: PostgresSettings, root: Path) -> None:
        return None  # no rebuild leaves anything behind

    def rebuild(self, settings: PostgresSettings, root: Path, old: RecordStore,
                fill: Callable[[RecordStore], T]) -> Rebuilding[T]:
        raise StoreError("kbsync rebuild makes a fresh SQLite store; a PostgreSQL store is "
                         "repaired with the database's own tools (REINDEX, a restore)")


STORE_KINDS: dict[str, StoreKind[Any]] = {kind.name: kind for kind in (_Sqlite(), _Postgres())}
"""Every kind of store, by the ``kind`` its table names (or implies)."""


def store_kind(name: str) -> StoreKind[Any]:
    """The kind ``name``; ConfigError listing the kinds for one kbsync does not know."""
    try:
        return STORE_KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown store kind {name!r} (known: "
                          f"{', '.join(sorted(STORE_KINDS))})") from None
