"""What every command prints and how it fails, without Typer: exit codes, JSON, warnings,
and an error as one line.

The commands that must start at once (:mod:`kbsync.cli.quick`) run without importing Typer,
which with the Click it carries costs more to import than the rest of ``kbsync status``'s
own start; they and the Typer commands (:class:`kbsync.cli.base.Errors`) share this.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from typing import Any

from kbsync.errors import KbsyncError, LockedError, Terminated
from kbsync.terminal import json_escaped, printable

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_LOCKED",
    "EXIT_PROBLEMS",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "command_started",
    "echo",
    "emit",
    "end_command",
    "failed",
    "interrupted_code",
    "one_line",
    "start_command",
    "warn",
]

EXIT_ERROR = 1


EXIT_USAGE = 2


EXIT_LOCKED = 3


EXIT_PROBLEMS = 4


EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT) stopped the command: 128 + 2, as shells report it."""

EXIT_TERMINATED = 143
"""SIGTERM stopped the command (cleanly): 128 + 15, as shells report a process it killed."""


def echo(text: str, *, err: bool = False) -> None:
    """``text`` as a line on stdout (or stderr), flushed as ``typer.echo`` does."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def emit(data: Any) -> None:
    """Print ``data`` as indented JSON (what ``--json`` asks for), safe on a terminal."""
    echo(json_escaped(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def one_line(text: str) -> str:
    return printable(text, one_line=True)


def warn(lines: Iterable[str | None]) -> None:
    """Each of ``lines`` (None skipped) as one ``warning:`` line on stderr, in every output
    mode: what a read says of a store known to be damaged, or of damaged values it left out."""
    for line in lines:
        if line:
            echo(one_line(f"warning: {line}"), err=True)


def interrupted_code(exc: KeyboardInterrupt) -> int:
    """The exit code of a command that ``exc`` stopped: 143 for SIGTERM, 130 for Ctrl-C."""
    if isinstance(exc, Terminated):
        return 128 + exc.signum
    return EXIT_INTERRUPTED


def failed(exc: BaseException | None, *, as_json: bool, debug: bool) -> int | None:
    """The exit code of a command that ``exc`` ended, said: an interruption (``interrupted``
    on stderr), or a KbsyncError as one line on stderr; with ``as_json`` as one JSON object
    on stdout instead, so that a script reading ``--json`` gets JSON whether the command
    worked or not, and the line too only where a person watches stderr apart from stdout
    (:func:`_watched_apart`). None for what goes on up (any other error, and every error
    with ``debug``, as a traceback).

    Both, always, showed a terminal the error twice, and put a line that is not JSON
    after the object where a script read both streams as one (``2>&1``)."""
    if isinstance(exc, KeyboardInterrupt):  # what a command left undone is said by it
        echo("interrupted", err=True)
        return interrupted_code(exc)
    if isinstance(exc, KbsyncError) and not debug:
        if as_json:
            emit({"error": {"type": type(exc).__name__, "message": str(exc)}})
        if not as_json or _watched_apart():
            echo(printable(f"error: {exc}"), err=True)
        return EXIT_LOCKED if isinstance(exc, LockedError) else EXIT_ERROR
    return None


def _watched_apart() -> bool:
    """Whether stderr is a terminal and stdout is not (``--json > out.json``): the person
    at the terminal sees nothing of what went to stdout."""
    try:
        return sys.stderr.isatty() and not sys.stdout.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


_START: dict[str, float] = {}
"""When the ``kbsync`` command this process runs began (:func:`start_command`)."""


def start_command() -> None:
    """Mark now as the start of the command this process runs (``kbsync.cli.main`` does,
    before it imports the command's module): the time a report says it took counts from
    here, as the person waiting counts it."""
    _START["command"] = time.perf_counter()


def end_command() -> None:
    """Forget the mark of :func:`start_command`: the command it began has ended."""
    _START.clear()


def command_started(fallback: float) -> float:
    """When the command began (:func:`start_command`, a ``perf_counter`` reading); where
    nothing marked it (a command called from Python), ``fallback``."""
    return _START.get("command", fallback)
