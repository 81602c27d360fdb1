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
one application of :mod:`kbsync.cli.app`; importing them here registers them, in
the order ``kbsync --help`` lists them.
"""

from __future__ import annotations

import io
import sys

from kbsync.cli.app import app

# isort: off
# Imported to register their commands; the order of registration is that of the help.
from kbsync.cli import setup_commands, sync_commands  # noqa: F401
from kbsync.cli import read_commands, store_commands, server_commands  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``kbsync`` command (it exits with the command's exit code)."""
    for stream in (sys.stdout, sys.stderr):
        # A character the terminal's encoding lacks is shown escaped, not a crash.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    app(prog_name="kbsync")
