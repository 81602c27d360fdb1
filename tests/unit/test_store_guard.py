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
