"""Crash points: named places where kbsync writes, where a test can stop the process.

Every step that changes durable state (an SQL statement, a transaction
boundary, a vector write, a lock, a file rename or fsync) calls
:func:`crashpoint` first. Disarmed, that is one check of a module-level flag.
Armed (by :func:`arm`, or by environment variables read once at import), it
can record the name of each point reached, kill the process with ``SIGKILL``
at the N-th point (a crash: no cleanup, no ``finally``), or raise an I/O error
there (a failing disk). The reliability tests replay a scenario once per point.

Environment: ``KBSYNC_CRASHPOINTS_RECORD=<file>`` appends each name reached to
the file; ``KBSYNC_CRASH_AT=<N>`` kills the process at the N-th point reached;
``KBSYNC_FAIL_AT=<N>`` raises ``OSError(EIO)`` there instead. Each process
counts its own points, unless ``KBSYNC_CRASH_COUNTER=<file>`` names a counter
that every process inheriting it shares (a parallel sync's coordinator and its
workers): then the N-th point is the N-th that any of them reached, and the
one that reaches it is killed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal

__all__ = ["ENV_COUNTER", "ENV_CRASH_AT", "ENV_FAIL_AT", "ENV_RECORD", "arm", "crashpoint",
           "disarm", "reached"]

ENV_RECORD = "KBSYNC_CRASHPOINTS_RECORD"
ENV_CRASH_AT = "KBSYNC_CRASH_AT"
ENV_FAIL_AT = "KBSYNC_FAIL_AT"
ENV_COUNTER = "KBSYNC_CRASH_COUNTER"

_armed = False
_record: str | None = None
_counter: str | None = None
_crash_at = 0
_fail_at = 0
_reached = 0


def crashpoint(name: str) -> None:
    """Mark a write step; does nothing unless a test armed the crash points."""
    if _armed:
        _reach(name)


def _reach(name: str) -> None:
    global _reached
    if _counter is not None:
        n = _count_shared(name)
    else:
        _reached += 1
        n = _reached
        if _record is not None:
            _append(name)
    if n == _crash_at:
        os.kill(os.getpid(), signal.SIGKILL)
    if n == _fail_at:
        raise OSError(errno.EIO, f"injected I/O error at crash point {n} ({name})")


def _append(name: str) -> None:
    # Appended and closed at once: a kill at the next point must not lose this line.
    assert _record is not None
    with open(_record, "a", encoding="utf-8") as out:
        out.write(f"{name}\n")


def _count_shared(name: str) -> int:
    """Count this point in the shared counter file (and record it) under one file lock,
    so the numbers of concurrent processes are one sequence and the record follows it."""
    global _reached
    fd = os.open(_counter or "", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        n = int(os.pread(fd, 20, 0).decode() or 0) + 1
        # Written over in place at a fixed width: a process killed meanwhile never
        # leaves the file empty or half written for a reader that takes no lock.
        os.pwrite(fd, f"{n:020d}".encode(), 0)
        if _record is not None:
            _append(name)
    finally:
        os.close(fd)  # closing releases the lock
    _reached += 1
    return n


def arm(*, record: str | None = None, crash_at: int = 0, fail_at: int = 0,
        counter: str | None = None) -> None:
    """Count points from zero again; record names to ``record``, kill or fail at the N-th.

    With ``counter`` (a file), the count is the one shared through it (see the module).
    """
    global _armed, _record, _counter, _crash_at, _fail_at, _reached
    _record, _counter, _crash_at, _fail_at, _reached = record, counter, crash_at, fail_at, 0
    _armed = bool(record or counter or crash_at > 0 or fail_at > 0)


def disarm() -> None:
    """Make :func:`crashpoint` a no-op again."""
    arm()


def reached() -> int:
    """How many points this process reached since the last :func:`arm`."""
    return _reached


def _arm_from_environment() -> None:
    record = os.environ.get(ENV_RECORD) or None
    counter = os.environ.get(ENV_COUNTER) or None
    try:
        crash_at = int(os.environ.get(ENV_CRASH_AT) or 0)
        fail_at = int(os.environ.get(ENV_FAIL_AT) or 0)
    except ValueError:
        crash_at = fail_at = 0
    if record or counter or crash_at or fail_at:
        arm(record=record, crash_at=crash_at, fail_at=fail_at, counter=counter)


_arm_from_environment()
