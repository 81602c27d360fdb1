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
``KBSYNC_FAIL_AT=<N>`` raises ``OSError(EIO)`` there instead.
"""

from __future__ import annotations

import errno
import os
import signal

__all__ = ["ENV_CRASH_AT", "ENV_FAIL_AT", "ENV_RECORD", "arm", "crashpoint", "disarm", "reached"]

ENV_RECORD = "KBSYNC_CRASHPOINTS_RECORD"
ENV_CRASH_AT = "KBSYNC_CRASH_AT"
ENV_FAIL_AT = "KBSYNC_FAIL_AT"

_armed = False
_record: str | None = None
_crash_at = 0
_fail_at = 0
_reached = 0


def crashpoint(name: str) -> None:
    """Mark a write step; does nothing unless a test armed the crash points."""
    if _armed:
        _reach(name)


def _reach(name: str) -> None:
    global _reached
    _reached += 1
    if _record is not None:
        # Appended and closed at once: a kill at the next point must not lose this line.
        with open(_record, "a", encoding="utf-8") as out:
            out.write(f"{name}\n")
    if _reached == _crash_at:
        os.kill(os.getpid(), signal.SIGKILL)
    if _reached == _fail_at:
        raise OSError(errno.EIO, f"injected I/O error at crash point {_reached} ({name})")


def arm(*, record: str | None = None, crash_at: int = 0, fail_at: int = 0) -> None:
    """Count points from zero again; record names to ``record``, kill or fail at the N-th."""
    global _armed, _record, _crash_at, _fail_at, _reached
    _record, _crash_at, _fail_at, _reached = record, crash_at, fail_at, 0
    _armed = bool(record or crash_at > 0 or fail_at > 0)


def disarm() -> None:
    """Make :func:`crashpoint` a no-op again."""
    arm()


def reached() -> int:
    """How many points were reached since the last :func:`arm`."""
    return _reached


def _arm_from_environment() -> None:
    record = os.environ.get(ENV_RECORD) or None
    try:
        crash_at = int(os.environ.get(ENV_CRASH_AT) or 0)
        fail_at = int(os.environ.get(ENV_FAIL_AT) or 0)
    except ValueError:
        crash_at = fail_at = 0
    if record or crash_at or fail_at:
        arm(record=record, crash_at=crash_at, fail_at=fail_at)


_arm_from_environment()
