"""One writer at a time: an advisory lock on a file beside the store (never the store itself).

The kernel drops the lock when the holder dies, so a killed sync never leaves
a stuck lock behind.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from kbsync.crashpoints import crashpoint
from kbsync.errors import LockedError
from kbsync.store.guard import guarded, store_error

__all__ = ["WriterLock"]


def _os_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError)


@guarded(lambda lock: str(lock.path), _os_error)
class WriterLock:
    """Exclusive lock on ``path``; waits (calling ``on_wait`` once) or fails fast."""

    def __init__(self, path: str | Path, *, wait: bool = True,
                 on_wait: Callable[[str], None] | None = None, poll: float = 0.1) -> None:
        self.path = Path(path)
        self.wait = wait
        self.on_wait = on_wait
        self.poll = poll
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            crashpoint("lock.acquire")
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise store_error(str(self.path), exc, "cannot open the lock file") from exc
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _read_holder(fd)
                if not self.wait:
                    os.close(fd)
                    raise LockedError(
                        f"another kbsync process{holder} is writing to this knowledge base "
                        f"(lock {self.path})"
                    ) from None
                if not told and self.on_wait is not None:
                    self.on_wait(f"waiting for another kbsync process{holder} to finish…")
                    told = True
                time.sleep(self.poll)
        self._fd = fd
        try:
            # Only a hint for the next waiter's message: the lock is the flock itself,
            # and a full disk must not stop `gc` or `erase` from freeing space.
            crashpoint("lock.acquired")
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:
            pass

    def holder(self) -> str | None:
        """The process that holds the lock now (``"pid 123"``), or None: free, or not known.

        Read from ``/proc/locks`` (Linux), so asking takes no lock: a probe with flock
        could make a writer that does not wait fail in the meantime.
        """
        try:
            found = os.stat(self.path)
            with open("/proc/locks", encoding="ascii") as table:
                lines = table.read().splitlines()
        except OSError:
            return None
        file = f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"
        for line in lines:  # "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1835060 0 EOF"
            fields = line.split()
            if fields[1:2] == ["FLOCK"] and fields[3:4] == ["WRITE"] and fields[5:6] == [file]:
                return f"pid {fields[4]}"
        return None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                crashpoint("lock.release")
            except OSError as exc:
                raise store_error(str(self.path), exc, "cannot release the lock") from exc
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""
