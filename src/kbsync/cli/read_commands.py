"""Commands that read: chunk, status, search, diff."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbsync.cli.base import (
    EXIT_ERROR,
    EXIT_USAGE,
    ConfigOption,
    Errors,
    JsonOption,
    app,
    emit,
    open_kb,
    state,
    warn,
)
from kbsync.errors import KbsyncError, ParameterError
from kbsync.model import SearchMode
from kbsync.terminal import printable

if TYPE_CHECKING:
    from rich.console import Console

    from kbsync.app.results import DocumentDiff
    from kbsync.store.filters import Filters

__all__ = ["chunk", "diff", "search", "status"]

def _strategy_name(value: str | None) -> str | None:
    """A ``--strategy`` checked as the command line is read: a wrong name is a usage error."""
    if value is not None:
        from kbsync.core.chunking import make_params

        try:
            make_params(value)
        except ParameterError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


@app.command()
def chunk(
    paths: Annotated[list[Path], typer.Argument(help="Files, or folders to chunk every file of.")],
    strategy: Annotated[str | None, typer.Option(
        help="tttd, local, sentences or bytes (default: tttd, or the knowledge base's).",
        callback=_strategy_name)] = None,
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
    config: Annotated[Path | None, typer.Option(
        "-c", "--config", help="Chunk as this knowledge base does (its kbsync.toml or folder); "
                               "the options above override its [chunker].")] = None,
) -> None:
    """Print the chunks of files (offsets, tokens, boundary kind, identity) and diagnostics."""
    from rich.console import Console

    from kbsync.app.chunk_files import chunk_files
    from kbsync.cli.render import chunks_table, diagnostics_table

    params: dict[str, Any] = {}
    if config is not None:
        with Errors(as_json), open_kb(config) as kb:
            params = kb.config.chunker.settings()  # token_counter = "embedder" resolved
            strategy = strategy or kb.config.chunker.strategy
    if min_tokens is not None:
        params["min_tokens"] = min_tokens
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if snap:
        params["snap"] = True
    if token_counter is not None:
        params["token_counter"] = token_counter
    with Errors(as_json):
        chunked = chunk_files(paths, strategy or "tttd", **params)
    listing = show_chunks if show_chunks is not None else len(chunked.files) == 1
    if as_json:
        emit(chunked.to_dict(chunks=listing))
    else:
        console = Console()
        if listing:
            for name, result in chunked.files.items():
                console.print(chunks_table(result.chunks, title=name))
        else:
            console.print(f"[bold]{len(chunked.files)}[/] files, "
                          f"[bold]{chunked.diagnostics.chunk_count}[/] chunks")
        for name, why in chunked.failures.items():
            typer.echo(printable(f"error: {name}: {why}"), err=True)
        console.print(diagnostics_table(chunked.diagnostics))
    if chunked.failures:
        raise typer.Exit(EXIT_ERROR)


@app.command()
def status(config: ConfigOption = Path("."), as_json: JsonOption = False) -> None:
    """Documents, chunks, embeddings and the last run."""
    from kbsync.cli.status_view import show_status

    code = show_status(config, as_json=as_json, debug=state["debug"])
    if code:
        raise typer.Exit(code)


def _unknown_sources(filters: Filters, stored: Collection[str]) -> list[str]:
    """The values of a ``source=`` filter that match no source the store holds."""
    from kbsync.store.filters import Condition, Filters, matches

    wanted = filters.values_of("source")
    return [v for v in wanted if not any(
        matches(Filters((Condition("source", "=", (v,)),)), s, "", {}) for s in stored)]


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("-k", min=1, help="How many results.")] = 5,
    mode: Annotated[SearchMode | None, typer.Option(
        help="vector, text or hybrid (default: [search] mode; else text with the hashing "
             "embedder, hybrid with a model).")] = None,
    context: Annotated[int | None, typer.Option(
        help="Return each hit with its section neighbours, up to this many tokens "
             "(default: [search] context_tokens; 0 for the chunk alone).")] = None,
    where: Annotated[list[str] | None, typer.Option(
        "--where", metavar="NAME=VALUE",
        help="Only documents whose NAME is VALUE: source, path (the document's key), title or a "
             "metadata key (front matter, HTML meta, PDF info); a list matches when one item "
             "does. A VALUE with * or ? is a glob (* spans /). NAME!=VALUE excludes; "
             "NAME<VALUE, <=, >, >= compare numbers and dates (date>=2024-01-01). Repeat it: "
             "all must hold, except the same NAME=… twice, which matches either value. An "
             "unknown name matches nothing.")] = None,
    rerank: Annotated[bool | None, typer.Option(
        "--rerank/--no-rerank",
        help="Read the best candidates again with the cross-encoder of [search] rerank_model "
             "(default: [search] rerank).")] = None,
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Search the current chunks: vector similarity, full text, or both fused.

    Each hit shows its rank and a relevance from 0 to 1 (`--json` also gives the raw score).
    """
    from kbsync.app.served import served_query_vector
    from kbsync.cli.render import hit_blocks
    from kbsync.report import hit_dict
    from kbsync.store.filters import parse_where

    if not query.strip():
        typer.echo("error: the query is empty: give the words to look for", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        filters = parse_where(where or ())
    except KbsyncError as exc:  # a malformed --where, named
        typer.echo(printable(f"error: --where: {exc}"), err=True)
        raise typer.Exit(EXIT_USAGE) from None
    with Errors(as_json), open_kb(config) as kb:
        mode = mode or kb.config.default_search_mode
        vector = None
        # The local model embeds a query without torch once its ONNX export is cached (a
        # sync makes it); until then a running `kbsync serve` that holds it loaded answers.
        if mode != "text" and kb.config.embedder.kind == "local" \
                and not getattr(kb.embedder, "queries_ready", False):
            vector = served_query_vector(kb.config, kb.embedder.identity, query)
            if vector is None:
                typer.echo("loading the local model once (its query encoder is exported "
                           "for the next searches)", err=True)
        hits = kb.search(query, k=k, mode=mode, context_tokens=context, query_vector=vector,
                         filters=filters, rerank=rerank)
        unknown = [] if hits else _unknown_sources(filters, kb.store.source_names())
    for name in unknown:  # a misspelled source filters everything out without a word
        typer.echo(printable(f"note: no source is named {name!r}"), err=True)
    warn(hits.warnings)
    if as_json:
        emit({"hits": [hit_dict(h) for h in hits], "warnings": list(hits.warnings)})
    else:
        from rich.console import Console

        Console().print(hit_blocks(hits))


@app.command()
def diff(
    key: Annotated[str, typer.Argument(help="The document's key.")],
    source: Annotated[str | None, typer.Option(
        help="The source the document is in, where several sources hold that key.")] = None,
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """The last change of a document: verdict, kind and reason, similarity and the changed
    regions; and the fields its last metadata change set, changed or removed."""
    from rich.console import Console
    from rich.text import Text

    from kbsync.cli.render import diff_heading, edit_summary, highlighted

    with Errors(as_json), open_kb(config) as kb:
        change = kb.diff(key, source)
        damage = kb.damage
    warn([damage])
    if as_json:
        emit({**change.to_dict(), "warnings": [damage] if damage else []})
        return
    console = Console()
    if change.metadata_last:  # the newest change: the text below is older
        console.print(diff_heading(change.key, change.source, _fields_said(change)))
        for line in _field_lines(change):
            console.print(line, highlight=False)
    moved = "" if change.moved_from is None else \
        f"moved from {change.moved_from} {change.moved}; "
    if change.change is None:
        console.print(diff_heading(change.key, change.source, f"{moved}first version of "
                                   f"{change.last_changed}: no earlier text to compare with"))
        _older_fields(console, change)
        return
    console.print(diff_heading(change.key, change.source,
                               f"{moved}changed {change.last_changed}: "
                               f"{edit_summary(change.change)}"))
    plain = not console.is_terminal or console.no_color  # marks where colour is not shown
    if change.regions:
        console.print(Text("added, in the current text:", style="bold"))
        console.print(highlighted(change.text, change.change.regions,
                                  marks=("{+", "+}") if plain else ("", "")))
    if change.removed and change.previous is not None:
        console.print(Text("removed, from the previous text:", style="bold"))
        console.print(highlighted(change.previous, change.change.removed_regions,
                                  style="black on red",
                                  marks=("[-", "-]") if plain else ("", "")))
    _older_fields(console, change)


def _fields_said(change: DocumentDiff) -> str:
    count = len(change.fields)
    return (f"metadata changed {change.fields_changed}: {count} field"
            f"{'' if count == 1 else 's'}, the text as it was")


def _field_lines(change: DocumentDiff) -> list[str]:
    """A line per metadata field of the last metadata change: its value before and after."""
    lines = []
    for f in change.fields:
        said = (f"set to {f.after}" if f.before is None else f"removed (was {f.before})"
                if f.after is None else f"{f.before} → {f.after}")
        lines.append(printable(f"  {f.field}: {said}", one_line=True))
    return lines


def _older_fields(console: Console, change: DocumentDiff) -> None:
    """The last metadata change, when it is older than the text's: below the text's."""
    if change.fields and not change.metadata_last:
        console.print(_fields_said(change), highlight=False)
        for line in _field_lines(change):
            console.print(line, highlight=False)
