"""The Typer application every command registers on, and what the commands share: exit codes,
options, errors as one line, JSON output.

A command imports what it needs when it runs (:func:`open_kb`, the renderers): starting
``kbsync status`` must not pay for NumPy, the sync or the extractors."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbsync.cli.output import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_PROBLEMS,
    EXIT_TERMINATED,
    EXIT_USAGE,
    emit,
    failed,
    interrupted_code,
    one_line,
    warn,
)

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

    With ``as_json`` the error is JSON on stdout instead (``{"error": {"type",
    "message"}}``), so a script reading ``--json`` output gets JSON whether the command
    worked or not; the line goes to stderr as well only when stderr is a terminal and
    stdout is not (:func:`kbsync.cli.output.failed`).
    """

    def __init__(self, as_json: bool = False) -> None:
        self._as_json = as_json

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        code = failed(exc, as_json=self._as_json, debug=state["debug"])
        if code is not None:
            raise typer.Exit(code) from None


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


def interrupted_exit(exc: KeyboardInterrupt) -> typer.Exit:
    """The exit of a command that ``exc`` stopped: 143 for SIGTERM, 130 for Ctrl-C."""
    return typer.Exit(interrupted_code(exc))


def open_kb(config: Path | str) -> KnowledgeBase:
    """The knowledge base of ``config`` (:meth:`KnowledgeBase.open`), imported when a
    command first needs it."""
    from kbsync.app.knowledge_base import KnowledgeBase

    return KnowledgeBase.open(config)
