"""The Typer application every command registers on, and what the commands share: exit codes,
options, errors as one line, JSON output.

A command imports what it needs when it runs (:func:`open_kb`, the renderers): starting
``kbsync status`` must not pay for NumPy, the sync or the extractors."""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbsync.errors import KbsyncError, LockedError, Terminated
from kbsync.terminal import json_escaped, printable

if TYPE_CHECKING:
    from kbsync.app.knowledge_base import KnowledgeBase

CONFIG_NAME = "kbsync.toml"  # kbsync.engine's, which the start of every command would import

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_LOCKED",
    "EXIT_PROBLEMS",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "HELP",
    "ConfigOption",
    "EndpointOption",
    "Errors",
    "FailOn",
    "FailOnOption",
    "JsonOption",
    "QuietOption",
    "app",
    "emit",
    "interrupted_exit",
    "one_line",
    "open_kb",
    "sources_app",
    "state",
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


HELP = {"help_option_names": ["-h", "--help"]}
"""Every command and group takes ``-h`` as ``--help``."""


app = typer.Typer(
    help="Keep a retrieval knowledge base in sync with changing sources.",
    context_settings=HELP,
    no_args_is_help=True,
    add_completion=False,
    # Help text names kbsync.toml tables ("[index] confirm_above_tokens"): not Rich markup.
    rich_markup_mode=None,
)


state = {"debug": False}


def _version(asked: bool) -> None:
    """``--version``: print kbsync's version and stop (as ``kbsync version`` prints it)."""
    if asked:
        from kbsync import __version__

        typer.echo(__version__)
        raise typer.Exit


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option(help="Show tracebacks of errors.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version of kbsync and exit.", is_eager=True,
        callback=_version)] = False,
) -> None:
    state["debug"] = debug


class Errors:
    """Turn a KbsyncError into one line on stderr and exit code 1 (traceback with --debug),
    and an interruption into exit code 130 (Ctrl-C) or 143 (SIGTERM).

    With ``as_json`` the error is also JSON on stdout (``{"error": {"type", "message"}}``),
    so a script reading ``--json`` output gets JSON whether the command worked or not,
    while the person watching stderr still sees the line.
    """

    def __init__(self, as_json: bool = False) -> None:
        self._as_json = as_json

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if isinstance(exc, KeyboardInterrupt):  # what a command left undone is said by it
            typer.echo("interrupted", err=True)
            raise interrupted_exit(exc) from None
        if isinstance(exc, KbsyncError) and not state["debug"]:
            if self._as_json:
                emit({"error": {"type": type(exc).__name__, "message": str(exc)}})
            typer.echo(printable(f"error: {exc}"), err=True)
            raise typer.Exit(EXIT_LOCKED if isinstance(exc, LockedError) else EXIT_ERROR)


ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help=f"The {CONFIG_NAME} file or its folder.")
]


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


QuietOption = Annotated[bool, typer.Option(
    "--quiet", "-q", help="Print nothing when all goes well (problems still go to stderr; "
    "--json output is whole).")]


class FailOn(StrEnum):
    """Which problems of a sync make it exit 4."""

    NEW = "new"
    """Problems this run met first: a document that failed as it is for the first time, an
    incomplete listing, blocked deletions. A document still failing as it did is not."""
    ANY = "any"
    """Every problem, documents still failing included."""


FailOnOption = Annotated[FailOn, typer.Option(
    help="Exit 4 for new problems only (a document still failing as it did in an earlier "
    "sync is reported, and exits 0), or for any problem.")]


EndpointOption = Annotated[str | None, typer.Option(
    "--endpoint-url", help="The server of the s3:// sources when it is not AWS (MinIO, Ceph, "
    "R2...), written as their storage_options endpoint_url.")]


sources_app = typer.Typer(help="Add or remove sources of the knowledge base.",
                          context_settings=HELP, no_args_is_help=True)


app.add_typer(sources_app, name="sources")


def emit(data: Any) -> None:
    """Print ``data`` as indented JSON (what ``--json`` asks for), safe on a terminal."""
    typer.echo(json_escaped(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def interrupted_exit(exc: KeyboardInterrupt) -> typer.Exit:
    """The exit of a command that ``exc`` stopped: 143 for SIGTERM, 130 for Ctrl-C."""
    if isinstance(exc, Terminated):
        return typer.Exit(128 + exc.signum)
    return typer.Exit(EXIT_INTERRUPTED)


def one_line(text: str) -> str:
    return printable(text, one_line=True)


def warn(lines: Iterable[str | None]) -> None:
    """Each of ``lines`` (None skipped) as one ``warning:`` line on stderr, in every output
    mode: what a read says of a store known to be damaged, or of damaged values it left out."""
    for line in lines:
        if line:
            typer.echo(one_line(f"warning: {line}"), err=True)
def open_kb(config: Path | str) -> KnowledgeBase:
    """The knowledge base of ``config`` (:meth:`KnowledgeBase.open`), imported when a
    command first needs it."""
    from kbsync.app.knowledge_base import KnowledgeBase

    return KnowledgeBase.open(config)
