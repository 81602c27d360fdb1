"""Running git safely: its environment and options, and a long-lived ``git cat-file --batch``
that reads a source's blobs one after the other.

Every git command of the git source runs here with an environment that never prompts
and cannot be pointed at another repository, and with options that run no program a
repository's configuration names.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import weakref
from typing import IO

from kbsync.errors import DocumentError, SourceError

__all__ = ["SAFE", "Blobs", "git_env", "last_line"]

# Variables that would point git at another repository, index or object store than ours.
_REDIRECTING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_COMMON_DIR",
                "GIT_CEILING_DIRECTORIES", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")

def git_env(ceiling: str | None) -> dict[str, str]:
    """The environment of every git command: never prompts, never redirected elsewhere."""
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"  # reading must not take the index lock of a clone
    env["LC_ALL"] = "C"
    if ceiling is not None:
        # A plain folder inside some other repository must not be taken for that one.
        env["GIT_CEILING_DIRECTORIES"] = ceiling
    return env


# Reading runs no program a repository's configuration names, and takes paths literally.
SAFE = ("-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}",
         "--literal-pathspecs")


def last_line(stderr: bytes) -> str:
    """What git said, on one line, fit for a message."""
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    text = lines[-1] if lines else "no message"
    return text.encode("ascii", "backslashreplace").decode("ascii")


class Blobs:
    """One ``git cat-file --batch`` process answering blob reads, one at a time."""

    def __init__(self, git_dir: str, where: str) -> None:
        self._git_dir = git_dir
        self._where = where
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes]], Blobs] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._proc = subprocess.Popen(
                    ["git", *SAFE, f"--git-dir={self._git_dir}", "cat-file", "--batch"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    env=git_env(None))
            except OSError as exc:
                raise SourceError(f"{self._where}: git cat-file cannot start: {exc}") from exc
            self._finalizer = weakref.finalize(self, _stop, self._proc)
        return self._proc

    def read(self, blob: str, locator: str, cap: int) -> bytes:
        try:
            proc = self._start()
        except SourceError as exc:
            raise DocumentError(locator, str(exc)) from exc
        stdin, stdout = proc.stdin, proc.stdout
        assert stdin is not None
        assert stdout is not None
        try:
            stdin.write(blob.encode("ascii") + b"\n")
            stdin.flush()
            header = stdout.readline().split()
            if len(header) == 2 and header[1] == b"missing":
                raise DocumentError(locator, f"blob {blob} is missing from {self._where}")
            if len(header) != 3 or header[1] != b"blob":
                self.close()
                raise DocumentError(locator, f"git cat-file answered {header!r} for blob {blob}")
            size = int(header[2])
            if size > cap:
                _skip(stdout, size + 1)
                raise DocumentError(locator, f"is {size:,} bytes, over the cap of {cap:,} bytes "
                                             "(max_bytes); not read")
            data = _read_exactly(stdout, size)
            stdout.read(1)  # the newline after every object
        except (OSError, ValueError, EOFError) as exc:
            self.close()
            raise DocumentError(locator, f"git cat-file failed reading blob {blob}: "
                                         f"{type(exc).__name__}: {exc}") from exc
        return data

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._proc = None
        self._finalizer = None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a ``git cat-file --batch`` process: closing its input ends it."""
    with contextlib.suppress(OSError, ValueError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError(f"git cat-file ended after {len(data)} of {size} bytes")
    return data


def _skip(stream: IO[bytes], size: int) -> None:
    while size > 0:
        got = stream.read(min(size, 1 << 20))
        if not got:
            raise EOFError("git cat-file ended early")
        size -= len(got)
