"""The store guard turns driver errors into one-line StoreErrors, through mixins too."""

from __future__ import annotations

import sqlite3
from typing import Protocol

import pytest

from kbsync.errors import StoreError
from kbsync.store.guard import guarded, sqlite_or_os_error
from kbsync.store.sqlite import SqliteStore


class _Role(Protocol):
    def count(self) -> int: ...


class _Tables:
    def count(self) -> int:
        raise sqlite3.OperationalError("disk I/O error")

    def _helper(self) -> int:
        raise sqlite3.OperationalError("disk I/O error")


class _Overriding(_Tables):
    def count(self) -> int:
        raise OSError("No space left on device")


def test_a_method_a_guarded_class_inherits_from_a_mixin_raises_a_store_error() -> None:
    @guarded(lambda store: "the store", sqlite_or_os_error)
    class Store(_Tables, _Role):
        pass

    with pytest.raises(StoreError, match="the store"):
        Store().count()


def test_an_override_is_what_the_guard_wraps_and_private_methods_are_left_alone() -> None:
    @guarded(lambda store: "the store", sqlite_or_os_error)
    class Store(_Overriding):
        pass

    with pytest.raises(StoreError, match="No space left"):
        Store().count()
    with pytest.raises(sqlite3.OperationalError):
        Store()._helper()


def test_every_public_method_of_the_sqlite_store_is_guarded_wherever_it_is_defined() -> None:
    public = [name for name in dir(SqliteStore)
              if not name.startswith("_") and callable(getattr(SqliteStore, name))]
    assert len(public) > 30
    for name in public:
        assert hasattr(getattr(SqliteStore, name), "__wrapped__"), name


class _CorruptedError(Exception):
    """A driver's error that carries a SQLSTATE, as psycopg's do."""

    sqlstate = "XX001"


class _Noting:
    def __init__(self) -> None:
        self.noted: list[str | None] = []

    def remember_damage(self, reason: str | None) -> None:
        self.noted.append(reason)

    def read(self) -> int:
        raise sqlite3.DatabaseError("database disk image is malformed")

    def fetch(self) -> int:
        raise _CorruptedError("invalid page in block 7 of relation base/1/2")

    def write(self) -> int:
        raise sqlite3.OperationalError("disk I/O error")


def test_a_driver_error_that_says_the_store_is_damaged_is_remembered() -> None:
    @guarded(lambda store: "the store", lambda exc: isinstance(exc, Exception))
    class Store(_Noting):
        pass

    store = Store()
    with pytest.raises(StoreError, match="malformed; the store is damaged"):
        store.read()
    with pytest.raises(StoreError, match=r"block 7.*; the store is damaged"):
        store.fetch()
    with pytest.raises(StoreError, match="disk I/O error"):
        store.write()  # no damage: nothing to remember
    assert store.noted == [
        "the database reported damage: database disk image is malformed",
        "the database reported damage: invalid page in block 7 of relation base/1/2"]
