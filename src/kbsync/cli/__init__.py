"""The command line: parse, call the library, render, exit.

Exit codes: 0 success; 1 an error kbsync reports (one line on stderr, the
traceback only with ``--debug``); 2 a usage error; 3 another process holds the
writer lock (with ``--no-wait``); 4 the command finished but found new problems
(documents that failed for the first time as they are, blocked deletions, incomplete
listings, ``verify`` findings; a sync's documents still failing as before only with
``--fail-on any``); 130 Ctrl-C and 143
SIGTERM stopped the command (128 + the signal's number; a sync is recorded as
interrupted, and its embeddings are kept).

The commands live in modules by what they do (``setup_commands``, ``read_commands``,
``sync_commands``, ``store_commands``, ``server_commands``), each registering on the
one application of :mod:`kbsync.cli.base` when imported. ``app`` is that application with
every command, in the order ``kbsync --help`` lists them; :func:`main`, the ``kbsync``
command, imports only the module of the command it is asked for (:data:`COMMAND_MODULES`),
so that a command starts without the others' imports and Typer builds one module's
commands, not every command. ``kbsync --version`` and ``kbsync status`` start without Typer
at all (:mod:`kbsync.cli.quick`).
"""

from __future__ import annotations

import importlib
import io
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kbsync.cli.output import end_command, start_command
from kbsync.cli.quick import quick

if TYPE_CHECKING:
    import typer

    from kbsync.cli.base import app

__all__ = ["COMMAND_MODULES", "app", "main"]

MODULES = ("setup_commands", "sync_commands", "read_commands", "store_commands",
           "server_commands")
"""The command modules, in the order of the help."""

COMMAND_MODULES = {
    "version": "setup_commands", "init": "setup_commands", "sources": "setup_commands",
    "plan": "sync_commands", "sync": "sync_commands", "worker": "sync_commands",
    "watch": "sync_commands",
    "chunk": "read_commands", "status": "read_commands", "search": "read_commands",
    "diff": "read_commands",
    "verify": "store_commands", "erase": "store_commands", "rebuild": "store_commands",
    "gc": "store_commands",
    "mcp": "server_commands", "serve": "server_commands",
}
"""The module that registers each command (and the ``sources`` group)."""


def __getattr__(name: str) -> Any:
    """``app``: the application with every command registered."""
    if name == "app":
        globals()["app"] = found = _registered(MODULES)
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _registered(modules: Iterable[str]) -> typer.Typer:
    """The application, with the commands of ``modules`` (and any imported before)."""
    for module in modules:
        importlib.import_module(f"kbsync.cli.{module}")
    from kbsync.cli.base import app

    return app


def main() -> None:
    """Entry point of the ``kbsync`` command (it exits with the command's exit code)."""
    start_command()
    try:
        _main()
    finally:
        end_command()


def _main() -> None:
    """The command of ``sys.argv``, on the quick path or Typer's."""
    for stream in (sys.stdout, sys.stderr):
        # A character the terminal's encoding lacks is shown escaped, not a crash.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    # The command named first, as `kbsync status -c docs` names it; an option before it
    # (`kbsync --debug sync`), no command or a misspelt one: every command, for the help.
    args = sys.argv[1:]
    code = quick(args)  # `--version` and `status`, which must start at once: no Typer
    if code is not None:
        if code:
            raise SystemExit(code)
        return
    home = COMMAND_MODULES.get(args[0]) if args else None
    _registered([home] if home is not None else MODULES)(prog_name="kbsync")
