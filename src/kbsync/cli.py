"""The command line: parse, call the library, render, exit.

Exit codes: 0 success; 1 an error kbsync reports (one line on stderr, the
traceback only with ``--debug``); 2 a usage error; 3 another process holds the
writer lock (with ``--no-wait``); 4 the command finished but found problems
(documents that failed, blocked deletions, ``verify`` findings); 130 the sync
was interrupted (Ctrl-C, SIGTERM: it is recorded so, and its embeddings are kept).
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from kbsync import __version__, native
from kbsync.chunk_files import chunk_files
from kbsync.chunking import make_params
from kbsync.engine import (
    CONFIG_NAME,
    init_config,
    init_embedder,
    refuse_missing_folders,
)
from kbsync.errors import (
    ConfirmationRequiredError,
    KbsyncError,
    LockedError,
    ParameterError,
)
from kbsync.knowledge_base import KnowledgeBase, Progress, Rebuilt, SearchMode, SyncResult
from kbsync.render import (
    change_lines,
    chunks_table,
    diagnostics_table,
    diff_heading,
    highlighted,
    hit_blocks,
    rounded_down,
    sync_tables,
)
from kbsync.report import hit_dict
from kbsync.served import served_query_vector
from kbsync.store.filters import Filters, matches, parse_where
from kbsync.terminal import json_escaped, printable

__all__ = ["app", "main"]

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_PROBLEMS = 4
EXIT_INTERRUPTED = 130

app = typer.Typer(
    help="Keep a retrieval knowledge base in sync with changing sources.",
    no_args_is_help=True,
    add_completion=False,
    # Help text names kbsync.toml tables ("[index] confirm_above_tokens"): not Rich markup.
    rich_markup_mode=None,
)
_state = {"debug": False}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option(help="Show tracebacks of errors.")] = False,
) -> None:
    _state["debug"] = debug


@app.command()
def version(as_json: Annotated[bool, typer.Option("--json", help="Print JSON: the version, "
                                                  "Python's and the extras installed.")] = False,
            verbose: Annotated[bool, typer.Option("--verbose", help="Also say which chunking "
                                                  "implementation runs.")] = False,
            ) -> None:
    """Print the version of kbsync."""
    if as_json:
        _emit(version_info())
    else:
        typer.echo(__version__)
        if verbose:
            typer.echo(native.describe())


_EXTRAS = {
    "tiktoken": ("tiktoken",), "html": ("trafilatura",), "pdf": ("pypdf",),
    "watch": ("watchdog",), "local": ("sentence_transformers",), "openai": ("httpx",),
    "web": ("httpx", "protego"), "qdrant": ("qdrant_client",), "lancedb": ("lancedb",),
    "langchain": ("langchain_core",), "llamaindex": ("llama_index.core",), "mcp": ("mcp",),
    "serve": ("starlette", "jinja2", "uvicorn"), "postgres": ("psycopg", "pgvector"),
    "office": ("docx", "pptx", "openpyxl", "ebooklib", "lxml", "striprtf"),
    "onnx": ("onnxruntime", "onnx"), "fsspec": ("fsspec",), "s3": ("fsspec", "s3fs"),
}
"""The modules each optional extra brings (those of pyproject.toml's extras)."""


def version_info() -> dict[str, Any]:
    """kbsync's version, Python's, and for each optional extra whether its modules are
    installed (found, not imported: a broken install shows when the feature is used)."""
    import importlib.util
    import platform

    def found(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False

    return {"version": __version__, "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "chunking_core": "compiled" if native.kernel is not None else "numpy",
            "extras": {name: all(found(m) for m in modules)
                       for name, modules in _EXTRAS.items()}}


def _strategy_name(value: str | None) -> str | None:
    """A ``--strategy`` checked as the command line is read: a wrong name is a usage error."""
    if value is not None:
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
    params: dict[str, Any] = {}
    if config is not None:
        with _Errors(as_json), KnowledgeBase.open(config) as kb:
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
    with _Errors(as_json):
        chunked = chunk_files(paths, strategy or "tttd", **params)
    listing = show_chunks if show_chunks is not None else len(chunked.files) == 1
    if as_json:
        _emit(chunked.to_dict(chunks=listing))
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


class _Errors:
    """Turn a KbsyncError into one line on stderr and exit code 1 (traceback with --debug).

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
        if isinstance(exc, KbsyncError) and not _state["debug"]:
            if self._as_json:
                _emit({"error": {"type": type(exc).__name__, "message": str(exc)}})
            typer.echo(printable(f"error: {exc}"), err=True)
            raise typer.Exit(EXIT_LOCKED if isinstance(exc, LockedError) else EXIT_ERROR)


ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help=f"The {CONFIG_NAME} file or its folder.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
EndpointOption = Annotated[str | None, typer.Option(
    "--endpoint-url", help="The server of the s3:// sources when it is not AWS (MinIO, Ceph, "
    "R2...), written as their storage_options endpoint_url.")]
sources_app = typer.Typer(help="Add or remove sources of the knowledge base.", no_args_is_help=True)
app.add_typer(sources_app, name="sources")


def _emit(data: Any) -> None:
    """Print ``data`` as indented JSON (what ``--json`` asks for), safe on a terminal."""
    typer.echo(json_escaped(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


@app.command()
def init(
    sources: Annotated[list[str] | None, typer.Argument(
        help="Sources to keep in sync: folders, http(s) URLs, git+REPOSITORY, s3:// or "
             "other fsspec URLs.")] = None,
    folder: Annotated[Path, typer.Option(help="Where to write the configuration.")] = Path("."),
    allow_private: Annotated[list[str] | None, typer.Option(
        "--allow-private", help="Let the websites be crawled at this loopback or private "
        "address or range (repeatable; e.g. 127.0.0.1, 10.0.0.0/8).")] = None,
    embedder_kind: Annotated[str | None, typer.Option(
        "--embedder", help="hashing or local (default: local when installed).")] = None,
    endpoint_url: EndpointOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write kbsync.toml with these sources and the defaults (SQLite store under .kbsync/).

    The embedder is the local model when the extra `local` is installed, else the
    hashing embedder (lexical search), with a warning.
    """
    with _Errors(as_json):
        refuse_missing_folders(folder, sources or [])
        embedder, warning = init_embedder(embedder_kind)
        config = init_config(folder, sources or [], embedder=embedder,
                             allow_private=allow_private or [], endpoint_url=endpoint_url)
    if warning:
        typer.echo(f"warning: {warning}", err=True)
    if as_json:
        _emit({"config": str(config.file), "sources": [s.name for s in config.sources],
               "embedder": embedder["kind"]})
    else:
        typer.echo(f"wrote {config.file} with {len(config.sources)} source(s), "
                   f"embedder {embedder['kind']}")


@sources_app.command("add")
def sources_add(
    path: Annotated[str, typer.Argument(
        help="A folder, an http(s) URL, git+REPOSITORY, or an s3:// or other fsspec URL.")],
    name: Annotated[str | None, typer.Option(help="Its name in the knowledge base.")] = None,
    endpoint_url: EndpointOption = None,
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Add a source: a folder, a website, a git repository or an object store."""
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        kb.add_source(path, name, endpoint_url=endpoint_url)
        updated = kb.config
    if as_json:
        _emit({"sources": [s.name for s in updated.sources]})
    else:
        typer.echo(f"added {updated.sources[-1].name}")


@sources_app.command("remove")
def sources_remove(
    name: Annotated[str, typer.Argument(help="The source's name.")],
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Remove a source (its documents are deleted by the next sync)."""
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        kb.remove_source(name)
        updated = kb.config
    if as_json:
        _emit({"sources": [s.name for s in updated.sources]})
    else:
        typer.echo(f"removed {name}")


def _unknown_sources(filters: Filters, stored: Collection[str]) -> list[str]:
    """The values of a ``source=`` filter that match no source the store holds."""
    wanted = dict(filters.conditions).get("source", ())
    return [v for v in wanted
            if not any(matches(Filters((("source", (v,)),)), s, "", {}) for s in stored)]


def _progress_run(run: Callable[[Progress | None], SyncResult], quiet: bool) -> SyncResult:
    """``run(progress)`` with progress bars on stderr, or without any when ``quiet`` or
    when stderr is no terminal (a log file would get a blank line for the bars)."""
    from rich import progress as bars  # only the commands that draw bars pay for it

    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        return run(None)
    with bars.Progress(bars.TextColumn("{task.description}"), bars.BarColumn(),
                       bars.MofNCompleteColumn(), transient=True, console=console) as bar:
        tasks: dict[str, bars.TaskID] = {}

        def tick(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        return run(tick)


def _print_report(report: SyncResult, as_json: bool) -> None:
    """The report on stdout (as JSON, or as tables and lines); its problems on stderr."""
    if as_json:
        _emit(report.to_dict())
        _print_problems(report)
        return
    console = Console()
    for table in sync_tables(report):
        console.print(table)
    if report.diagnostics is not None and report.diagnostics.chunk_count:
        console.print(diagnostics_table(report.diagnostics))
    for s in report.sources:
        if s.skipped_erased:
            typer.echo(f"{printable(s.source, one_line=True)}: {s.skipped_erased} erased, "
                       "skipped (`kbsync erase --list`)")
        if s.revision:
            typer.echo(printable(f"{s.source}: at {s.revision}", one_line=True))
        if s.pages_not_due:
            typer.echo(f"{printable(s.source, one_line=True)}: {s.pages_checked} pages checked, "
                       f"{s.pages_not_due} not due (unchanged)")
    for line in change_lines(report):
        console.print(line, highlight=False)
    _print_problems(report)


def _print_problems(report: SyncResult) -> None:
    """Failures and warnings of a run, one line each on stderr."""
    for s in report.sources:
        for key, message in s.failures:
            typer.echo(printable(f"error: {s.source}:{key}: {message}" if key
                                 else f"error: {s.source}: {message}"), err=True)
        for warning in s.warnings:
            typer.echo(printable(f"warning: {s.source}: {warning}"), err=True)


@app.command()
def plan(config: ConfigOption = Path("."), as_json: JsonOption = False) -> None:
    """Show what a sync would do (documents, chunks to embed, embedding tokens); write nothing."""
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        report = _progress_run(lambda tick: kb.plan(progress=tick), as_json)
        cost = kb.estimate(report)
    if as_json:
        _emit({**report.to_dict(), "cost": cost.to_dict()})
    else:
        _print_report(report, as_json)
        typer.echo(cost.summary())
    if report.failed:  # what the sync would meet: failed documents, an incomplete listing
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def sync(
    config: ConfigOption = Path("."),
    verify: Annotated[bool, typer.Option("--verify", help="Read every file, even when its "
                                         "stat is unchanged.")] = False,
    allow_mass_delete: Annotated[bool, typer.Option(
        help="Allow deleting more than half of a source's documents.")] = False,
    wait: Annotated[bool, typer.Option(help="Wait for another writer to finish.")] = True,
    workers: Annotated[int, typer.Option(min=0, help="Process documents in this many processes "
                                         "(PostgreSQL store only).")] = 0,
    accept_replacements: Annotated[bool, typer.Option(
        help="Apply a new text that shares almost nothing with the stored one at once, "
             "instead of waiting for the next sync to confirm it.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Embed even more than [index] "
                                      "confirm_above_tokens tokens.")] = False,
    due: Annotated[bool, typer.Option("--due", help="Check only the web pages that are due "
                                      "for a revisit; the others count as unchanged.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Bring the knowledge base in step with its sources."""
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        def run(tick: Progress | None, confirmed: bool) -> SyncResult:
            return kb.sync(verify=verify, allow_mass_delete=allow_mass_delete, progress=tick,
                           wait=wait, on_wait=lambda message: typer.echo(message, err=True),
                           workers=workers, yes=confirmed, due=due,
                           accept_replacements=accept_replacements)

        try:
            try:
                report = _progress_run(lambda tick: run(tick, yes), as_json)
            except ConfirmationRequiredError as exc:
                if as_json or not sys.stdin.isatty():
                    raise
                typer.echo(str(exc), err=True)
                if not typer.confirm("Embed it all the same?", err=True):
                    raise typer.Exit(EXIT_ERROR) from None
                report = _progress_run(lambda tick: run(tick, True), as_json)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: the run is recorded as interrupted, every embedding kept.
            typer.echo("interrupted: what was applied stays, and every embedding computed is "
                       "cached; `kbsync sync` again finishes the rest", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
    _print_report(report, as_json)
    if report.failed:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def worker(
    config: ConfigOption = Path("."),
    run: Annotated[str | None, typer.Option(help="Serve this run only, then exit.")] = None,
    follow: Annotated[bool, typer.Option(help="Keep waiting for new runs.")] = False,
    poll: Annotated[float, typer.Option(min=0.1, help="Seconds between looks for "
                                        "work with --follow.")] = 2.0,
    quiet: Annotated[bool, typer.Option(help="Print errors only (the workers a sync starts: "
                                        "the sync reports what they did).")] = False,
) -> None:
    """Process documents of syncs in progress on a shared PostgreSQL store (`sync --workers`)."""
    with _Errors(), KnowledgeBase.open(config) as kb:
        done = kb.work(run=run, follow=follow, poll=poll)
    if not quiet:
        typer.echo(f"{done} documents processed", err=True)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def _duration(text: str) -> float:
    """Seconds of a duration like ``90s``, ``15m``, ``12h`` or ``1d``."""
    try:
        return float(text[:-1]) * _UNITS[text[-1]] if text[-1] in _UNITS else float(text)
    except (ValueError, IndexError):
        raise typer.BadParameter(f"{text!r} is not a duration like 90s, 15m, 12h or 1d") from None


@app.command()
def watch(
    config: ConfigOption = Path("."),
    interval: Annotated[str, typer.Option(help="Scheduled check every (e.g. 1d, 6h).")] = "1d",
    full_every: Annotated[str, typer.Option(help="Full revalidation every (e.g. 30d).")] = "30d",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Embed even more than [index] "
                                      "confirm_above_tokens tokens in a run.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Keep syncing: on file changes, on schedule, and with a periodic full revalidation."""
    every, full = _duration(interval), _duration(full_every)

    def show(report: SyncResult, reason: str) -> None:
        if as_json:
            # One line per run, so a consumer can read the stream line by line.
            typer.echo(json_escaped(json.dumps({"reason": reason, **report.to_dict()},
                                               ensure_ascii=False)))
        else:
            counts = ", ".join(f"{v} {k}" for k, v in report.documents.items() if v)
            typer.echo(f"{report.finished} {reason}: {counts or 'nothing to do'}")
            _print_problems(report)

    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        try:
            kb.watch(interval=every, full_every=full, on_report=show, yes=yes)
        except KeyboardInterrupt:
            typer.echo("stopped", err=True)


@app.command()
def status(config: ConfigOption = Path("."), as_json: JsonOption = False) -> None:
    """Documents, chunks, embeddings and the last run."""
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        data = kb.status().to_dict()
    if as_json:
        _emit(data)
    else:
        typer.echo(printable(_status_text(data)))


def _status_text(data: dict[str, Any]) -> str:
    """The status for people: one line per fact, counts of each source, the last run's actions."""
    unlisted = set(data["last_run"]["unlisted"]) if data["last_run"] else set()
    sources = ", ".join(
        f"{name} ({_count(data['by_source'].get(name, 0), 'document')}"
        + ("; the last sync could not list it, so they are kept as they were" if name in unlisted
           else "") + ")"
        for name in data["sources"]) or "none"
    lines = [f"config:     {data['config']}",
             f"embedder:   {data['embedder']}",
             f"sources:    {sources}",
             f"store:      {_count(data['documents'], 'document')}, "
             f"{_count(data['chunks'], 'chunk')}, {_count(data['embeddings'], 'embedding')}, "
             f"{_count(data['runs'], 'run')}"]
    last = data["last_run"]
    if last is None:
        lines.append("last sync:  never")
    elif last.get("interrupted"):
        lines.append(f"last sync:  interrupted at {last['finished']}, {last['applied']} "
                     f"documents applied (started {last['started']})")
    else:
        counts = sorted(last["documents"].items())
        # A run that did nothing because it failed says so, above its failures.
        acted = ", ".join(f"{n} {action}" for action, n in counts if n) or (
            "nothing done, because of these failures" if last["failures"] else "nothing to do")
        lines.append(f"last sync:  {last['started']} to {last['finished']}: {acted}")
    if data.get("writer"):
        lines.append(f"now:        a sync (or another writer, {data['writer']}) is running; "
                     "the counts are those committed so far")
    failures = last["failures"] if last is not None else []
    for failure in failures[:_STATUS_FAILURES]:
        where = (f"{failure['key']} ({failure['source']})" if failure["key"]
                 else failure["source"])  # a failure of the source itself, not of a document
        lines.append(f"  failed:   {where}: {failure['message']}")
    if len(failures) > _STATUS_FAILURES:
        lines.append(f"  and {len(failures) - _STATUS_FAILURES} more failures "
                     "(kbsync status --json lists them)")
    return "\n".join(lines)


# Failures of the last sync that the status lists for people (--json has them all).
_STATUS_FAILURES = 10


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("-k", min=1, help="How many results.")] = 5,
    mode: Annotated[SearchMode, typer.Option(help="vector, text or hybrid.")] = "hybrid",
    context: Annotated[int | None, typer.Option(
        help="Return each hit with its section neighbours, up to this many tokens "
             "(default: [search] context_tokens; 0 for the chunk alone).")] = None,
    where: Annotated[list[str] | None, typer.Option(
        "--where", metavar="NAME=VALUE",
        help="Only documents whose NAME is VALUE: source, path (the document's key), title or a "
             "metadata key (front matter, HTML meta, PDF info). A VALUE with * or ? is a glob "
             "(* spans /). Repeat it: different names must all match, the same name twice "
             "matches either value. An unknown name matches nothing.")] = None,
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Search the current chunks: vector similarity, full text, or both fused (default).

    Each hit shows its rank and a relevance from 0 to 1 (`--json` also gives the raw score).
    """
    if not query.strip():
        typer.echo("error: the query is empty: give the words to look for", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        filters = parse_where(where or ())
    except KbsyncError as exc:  # a malformed --where, named
        typer.echo(printable(f"error: --where: {exc}"), err=True)
        raise typer.Exit(EXIT_USAGE) from None
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        vector = None
        if mode != "text" and kb.config.embedder.get("kind") == "local":
            vector = served_query_vector(kb.config, kb.embedder.identity, query)
            if vector is None:
                typer.echo("loading the local model (a running `kbsync serve` keeps it "
                           "loaded, and searches then ask it)", err=True)
        hits = kb.search(query, k=k, mode=mode, context_tokens=context, query_vector=vector,
                         filters=filters)
        unknown = [] if hits else _unknown_sources(filters, kb.store.source_names())
    for name in unknown:  # a misspelled source filters everything out without a word
        typer.echo(printable(f"note: no source is named {name!r}"), err=True)
    if as_json:
        _emit([hit_dict(h) for h in hits])
    else:
        Console().print(hit_blocks(hits))


@app.command()
def diff(
    key: Annotated[str, typer.Argument(help="The document's key.")],
    source: Annotated[str | None, typer.Option(
        help="The source the document is in, where several sources hold that key.")] = None,
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """The last change of a document: verdict, similarity and the changed regions."""
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        change = kb.diff(key, source)
    if as_json:
        _emit(change.to_dict())
        return
    console = Console()
    moved = "" if change.moved_from is None else \
        f"moved from {change.moved_from} {change.moved}; "
    if change.change is None:
        console.print(diff_heading(change.key, change.source, f"{moved}first version of "
                                   f"{change.last_changed}: no earlier text to compare with"))
        return
    console.print(diff_heading(change.key, change.source,
                               f"{moved}changed {change.last_changed}: {change.verdict}, "
                               f"similarity {rounded_down(change.change.similarity, 3)}, "
                               f"{len(change.regions)} region(s) added, "
                               f"{len(change.removed)} removed"))
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


@app.command()
def verify(
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
    repair: Annotated[bool, typer.Option("--repair", help="Rebuild what the store holds twice "
                                         "(indexes, full text, chunk texts) and make the "
                                         "external vector store match the records.")
                      ] = False,
) -> None:
    """Check the store file (SQLite's integrity and full-text checks), every invariant of the
    store and the vector store; exit 4 with the problems found (with --repair, 4 only for
    problems that remain)."""
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        checked = kb.verify(repair=repair)
    if as_json:
        _emit({"ok": checked.ok, "problems": list(checked.problems),
               "remaining": list(checked.remaining), "repaired": list(checked.repaired)})
    elif not checked.problems:
        typer.echo("ok: every invariant holds")
    else:
        typer.echo(printable("\n".join(checked.problems)))
        for done in checked.repaired:
            typer.echo(printable(f"repair: {done}"))
        if repair:
            typer.echo("repaired" if checked.ok else printable(
                "still wrong after repair:\n" + "\n".join(checked.remaining)))
            if any("damaged" in line for line in checked.remaining):
                typer.echo("only a fresh store helps: `kbsync rebuild` builds one from the "
                           "sources, keeping the embedding cache")
    if not checked.ok:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def erase(
    pattern: Annotated[str | None, typer.Argument(
        help="A document key or a glob over keys.")] = None,
    config: ConfigOption = Path("."),
    list_erasures: Annotated[bool, typer.Option(
        "--list", help="List the remembered erasures instead.")] = False,
    undo: Annotated[bool, typer.Option(
        "--undo", help="Forget the erasure PATTERN: the next sync indexes its documents "
                       "again.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove every row, text and vector derived from matching documents, and remember it
    so that later syncs skip them (see --list and --undo)."""
    if list_erasures == (pattern is not None) or (undo and pattern is None):
        raise typer.BadParameter("give a PATTERN (with --undo to forget one), or --list")
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        if list_erasures:
            kept = kb.erasures()
            if as_json:
                _emit({"erasures": [{"pattern": e.pattern, "created": e.created,
                                     "key_hash": e.key_hash} for e in kept]})
            else:
                typer.echo("\n".join(
                    f"{e.created}  {_one_line(e.pattern)}"
                    + ("  (an exact key; only its hash is kept)" if e.key_hash else "")
                    for e in kept) or "no erasures")
            return
        assert pattern is not None
        if undo:
            kb.unerase(pattern)
            if as_json:
                _emit({"unerased": pattern})
            else:
                typer.echo(f"forgot the erasure {_one_line(pattern)}; the next sync indexes "
                           "its documents again")
            return
        gone = kb.erase(pattern).documents
    if as_json:
        _emit({"erased": [{"source": d.source, "key": d.key} for d in gone]})
    else:
        typer.echo(f"erased {len(gone)} document(s); later syncs skip {_one_line(pattern)} "
                   "(`kbsync erase --undo` forgets it)")


def _one_line(text: str) -> str:
    return printable(text, one_line=True)


@app.command()
def rebuild(config: ConfigOption = Path("."), as_json: JsonOption = False) -> None:
    """Build a fresh store from the sources, keeping every readable cached embedding, and put
    it in place of the old one (kept beside it as <store>.before-rebuild)."""
    done: list[Rebuilt] = []

    def run(tick: Progress | None) -> SyncResult:
        done.append(kb.rebuild(progress=tick))
        return done[0].result

    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        report = _progress_run(run, as_json)
    rebuilt = done[0]
    computed = sum(s.embeddings_computed for s in report.sources)
    if as_json:
        _emit({**report.to_dict(), "salvaged_embeddings": rebuilt.salvaged,
               "reused_embeddings": rebuilt.reused, "backup": str(rebuilt.backup)})
    else:
        _print_report(report, as_json)
        typer.echo(f"rebuilt: {rebuilt.salvaged} cached embeddings kept, {rebuilt.reused} "
                   f"reused, {computed} computed; the old store is kept as {rebuilt.backup}")
    if report.failed:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def gc(config: ConfigOption = Path("."), as_json: JsonOption = False) -> None:
    """Drop cache entries and texts nothing refers to, and compact the store."""
    with _Errors(as_json), KnowledgeBase.open(config) as kb:
        removed = dict(kb.gc().removed)
    if as_json:
        _emit(removed)
    else:
        typer.echo(", ".join(f"{v:,} {k.replace('_', ' ')} removed" for k, v in removed.items()))


@app.command()
def mcp(
    config: ConfigOption = Path("."),
    allow_sync: Annotated[bool, typer.Option(
        help="Let clients run the sync tool (by default they may only read).")] = False,
) -> None:
    """Serve the knowledge base over the Model Context Protocol on stdio (extra `mcp`)."""
    with _Errors():
        from kbsync.mcp_server import serve  # needs the `mcp` extra

        with KnowledgeBase.open(config) as kb:
            serve(kb, allow_sync=allow_sync)


@app.command("serve")
def serve_command(
    config: ConfigOption = Path("."),
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on.")] = 8765,
    allow_actions: Annotated[bool, typer.Option(
        "--allow-actions", help="Offer sync and erase (otherwise read-only).")] = False,
) -> None:
    """Serve a local web dashboard: sources, runs, document changes, search, a JSON API."""
    with _Errors():
        from kbsync.serve import is_loopback, serve  # needs the `serve` extra

        if not is_loopback(host):
            typer.echo(f"warning: {host} is reachable from other machines; the dashboard "
                       "has no login, so anyone who can reach it can read the knowledge base"
                       + (" and run its actions" if allow_actions else ""), err=True)
        with KnowledgeBase.open(config) as kb:
            if kb.config.embedder.get("kind") == "local":
                typer.echo("loading the local model (searches, here and from `kbsync "
                           "search`, then use it at once)", err=True)
                kb.query_vector("warm up")
            typer.echo(f"serving http://{host}:{port}/ "
                       f"({'actions allowed' if allow_actions else 'read-only'}); "
                       "Ctrl-C stops", err=True)
            serve(kb, host=host, port=port, allow_actions=allow_actions)


def main() -> None:
    """Entry point of the ``kbsync`` command (it exits with the command's exit code)."""
    for stream in (sys.stdout, sys.stderr):
        # A character the terminal's encoding lacks is shown escaped, not a crash.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    app(prog_name="kbsync")
