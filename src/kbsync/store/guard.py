"""Where a database driver's error becomes a one-line :class:`StoreError` with what to do.

A raw ``sqlite3`` or ``psycopg`` error (a full disk, a damaged page, a
read-only file) would reach the user as a traceback. Instead of catching
them at every call site, a store class is decorated once with :func:`guarded`:
every public method (generators included) turns a driver or I/O error into a
``StoreError`` that names the store and says what to do next.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from kbsync.errors import KbsyncError, StoreError

__all__ = ["DAMAGED", "READ_ONLY", "REPAIR", "advice", "guarded", "is_damage", "reported_damage",
           "sqlite_or_os_error", "store_error"]

T = TypeVar("T")

REPAIR = ("run `kbsync verify --repair`, or `kbsync rebuild` to build a fresh store from the "
          "sources (the embedding cache is kept)")
DAMAGED = f"the store is damaged: {REPAIR}"
READ_ONLY = ("the store is read-only: search, status, diff, plan and verify still work; "
             "make the store and its folder writable to sync, erase or collect")
_FULL = "the disk is full: free some space and run the command again (nothing was lost)"
_BUSY = "another process holds the store: run the command again when it is done"
_SERVER = "check that the database server is running and reachable"
_OTHER = "run `kbsync verify` to check the store"

_DAMAGE_WORDS = ("malformed", "not a database", "corrupt", "invalid page", "database disk image")


def is_damage(exc: BaseException) -> bool:
    """Whether a driver error says the store itself is damaged: SQLite's words for a
    malformed file, or PostgreSQL's SQLSTATE class XX (data or an index corrupted, or an
    internal error, which a damaged page or TOAST chunk gives too)."""
    if str(getattr(exc, "sqlstate", "") or "").startswith("XX"):
        return True
    text = str(exc).lower()
    return any(word in text for word in _DAMAGE_WORDS)


def reported_damage(exc: BaseException) -> str:
    """Why a store is known to be damaged when its database said so (what
    :meth:`~kbsync.store.Maintenance.remember_damage` is told)."""
    return f"the database reported damage: {' '.join(str(exc).split())}"


def advice(exc: BaseException) -> str:
    """What a person should do about ``exc``, in a few words."""
    text = str(exc).lower()
    code = exc.errno if isinstance(exc, OSError) else None
    if code == errno.ENOSPC or "disk is full" in text or "no space left" in text:
        return _FULL
    if (code in (errno.EROFS, errno.EPERM, errno.EACCES) or "readonly" in text
            or "read-only" in text or "permission denied" in text):
        return READ_ONLY
    if code == errno.ENOENT:
        return "a file or folder it needs is missing: check the path, then run the command again"
    if is_damage(exc):
        return DAMAGED
    if "locked" in text or "busy" in text:
        return _BUSY
    if any(c.__module__.startswith("psycopg") for c in type(exc).__mro__) and (
            "connection" in text or "server" in text):
        return _SERVER
    return _OTHER


def store_error(where: str, exc: BaseException, doing: str = "") -> StoreError:
    """The one-line error for ``exc`` met at ``where`` (while ``doing`` something, if said)."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    lead = f"{where}: {doing}: " if doing else f"{where}: "
    return StoreError(f"{lead}{message}; {advice(exc)}")


def guarded(where: Callable[[Any], str],
            is_driver_error: Callable[[BaseException], bool]) -> Callable[[type[T]], type[T]]:
    """A class decorator: every public method (and ``__init__``) of the class and of its
    bases raises a :class:`StoreError` instead of a driver error. ``where`` names the
    store of an instance (for the message); ``is_driver_error`` says which errors to
    translate."""

    def translate(self: Any, exc: Exception) -> Exception:
        if isinstance(exc, KbsyncError) or not is_driver_error(exc):
            return exc
        try:
            named = where(self)
        except AttributeError:  # failed before the instance knew its store
            named = type(self).__name__
        if is_damage(exc):
            remember(self, exc)
        return store_error(named, exc)

    def remember(self: Any, exc: Exception) -> None:
        """Note that the database said the store is damaged, so that writes wait for a
        repair and reads warn, in this process and the next ones."""
        note = getattr(self, "remember_damage", None)
        if note is not None:
            # The error in hand is the one to tell: failing to note it must not hide it.
            with contextlib.suppress(Exception):
                note(reported_damage(exc))

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isgeneratorfunction(function):
            @functools.wraps(function)
            def generator(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
                try:
                    yield from function(self, *args, **kwargs)
                except Exception as exc:
                    error = translate(self, exc)
                    if error is exc:
                        raise
                    raise error from exc
            return generator

        @functools.wraps(function)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return function(self, *args, **kwargs)
            except Exception as exc:
                error = translate(self, exc)
                if error is exc:
                    raise
                raise error from exc
        return method

    def decorate(cls: type[T]) -> type[T]:
        # A class made of mixins gets its bases' methods wrapped too; a Protocol's
        # are declarations, never called.
        methods: dict[str, Any] = {}
        for klass in reversed(cls.__mro__[:-1]):
            if not getattr(klass, "_is_protocol", False):
                methods.update(vars(klass))
        for name, value in methods.items():
            if inspect.isfunction(value) and (not name.startswith("_") or name == "__init__"):
                setattr(cls, name, wrap(value))
        return cls

    return decorate


def sqlite_or_os_error(exc: BaseException) -> bool:
    """A ``sqlite3`` error or an I/O error (what the SQLite store and scratch file meet)."""
    return isinstance(exc, sqlite3.Error | OSError)
