"""The command line: parse, call the library, render, exit.

Exit codes: 0 success, 1 an error kbsync reports (one line on stderr; the
traceback only with ``--debug``), 2 a usage error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from kbsync import __version__
from kbsync.chunking import chunk_text, make_params
from kbsync.chunking.diagnostics import diagnose
from kbsync.errors import KbsyncError
from kbsync.model import Chunk, ChunkingResult
from kbsync.normalize import NORMALIZER_VERSION
from kbsync.report import chunk_dict, chunks_table, diagnostics_dict, diagnostics_table

__all__ = ["app", "main"]

EXIT_ERROR = 1

app = typer.Typer(
    help="Keep a retrieval knowledge base in sync with changing sources.",
    no_args_is_help=True,
    add_completion=False,
)
_state = {"debug": False}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option(help="Show tracebacks of errors.")] = False,
) -> None:
    _state["debug"] = debug


@app.command()
def version() -> None:
    """Print the version of kbsync."""
    typer.echo(__version__)


@app.command()
def chunk(
    paths: Annotated[list[Path], typer.Argument(help="Files, or folders to chunk every file of.")],
    strategy: Annotated[str, typer.Option(help="tttd, local or bytes.")] = "tttd",
    min_tokens: Annotated[int | None, typer.Option(help="Smallest chunk, in tokens.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Largest chunk, in tokens.")] = None,
    snap: Annotated[bool, typer.Option(help="Snap cuts to paragraph or sentence breaks.")] = False,
    token_counter: Annotated[
        str | None, typer.Option(help="estimate (default) or tiktoken.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    show_chunks: Annotated[
        bool | None, typer.Option("--chunks/--no-chunks", help="List every chunk.")
    ] = None,
) -> None:
    """Print the chunks of files (offsets, tokens, boundary kind, identity) and diagnostics."""
    params: dict[str, Any] = {}
    if min_tokens is not None:
        params["min_tokens"] = min_tokens
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if snap:
        params["snap"] = True
    if token_counter is not None:
        params["token_counter"] = token_counter
    with _Errors():
        settings = make_params(strategy, **params)
        files = sorted(_files(paths))
        results: dict[str, ChunkingResult] = {}
        failures: dict[str, str] = {}
        for path in files:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                failures[str(path)] = f"cannot read as UTF-8 text: {exc}"
                continue
            results[str(path)] = chunk_text(text, strategy=strategy, **params)  # type: ignore[arg-type]
        everything: list[Chunk] = [c for r in results.values() for c in r.chunks]
        first = next(iter(results.values()), None)
        total = diagnose(
            everything,
            strategy=strategy,
            chunker_id=settings.chunker_id,
            params_hash=first.diagnostics.params_hash if first else "",
            normalizer_version=NORMALIZER_VERSION,
            token_counter=first.diagnostics.token_counter if first else "",
            snapping=snap,
        )
    listing = show_chunks if show_chunks is not None else len(results) == 1
    if as_json:
        payload = {
            "files": {
                name: {
                    "diagnostics": diagnostics_dict(r.diagnostics),
                    **({"chunks": [chunk_dict(c) for c in r.chunks]} if listing else {}),
                }
                for name, r in results.items()
            },
            "failures": failures,
            "diagnostics": diagnostics_dict(total),
        }
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        console = Console()
        if listing:
            for name, r in results.items():
                console.print(chunks_table(r.chunks, title=name))
        else:
            console.print(f"[bold]{len(results)}[/] files, [bold]{len(everything)}[/] chunks")
        for name, why in failures.items():
            typer.echo(f"error: {name}: {why}", err=True)
        console.print(diagnostics_table(total))
    if failures:
        raise typer.Exit(EXIT_ERROR)


def _files(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from (p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            yield path
        else:
            raise KbsyncError(f"{path}: no such file or folder")


class _Errors:
    """Turn a KbsyncError into one line on stderr and exit code 1 (traceback with --debug)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if isinstance(exc, KbsyncError) and not _state["debug"]:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_ERROR)


def main() -> None:
    """Entry point of the ``kbsync`` command."""
    app(prog_name="kbsync")
    sys.exit(0)
