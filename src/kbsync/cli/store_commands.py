"""Commands that look after the store: verify, erase, rebuild, gc."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbsync.cli.base import (
    EXIT_PROBLEMS,
    ConfigOption,
    Errors,
    JsonOption,
    app,
    emit,
    one_line,
    open_kb,
)
from kbsync.cli.sync_commands import print_report, progress_run
from kbsync.terminal import printable

if TYPE_CHECKING:
    from kbsync.app.knowledge_base import Progress, Rebuilt, SyncResult

__all__ = ["erase", "gc", "rebuild", "verify"]

@app.command()
def verify(
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
    repair: Annotated[bool, typer.Option("--repair", help="Make damaged values again (vectors "
                                         "embedded, chunk texts cut from their document, "
                                         "texts read from their source), rebuild what the "
                                         "store holds twice (indexes, full text, chunk "
                                         "texts) and make the external vector store match "
                                         "the records.")
                      ] = False,
) -> None:
    """Check the store file (SQLite's integrity and full-text checks), every invariant of the
    store, every stored value (texts against their digests and checksums, vectors finite and
    of the embedder's norm) and the vector store; exit 4 with the problems found (with
    --repair, 4 only for problems that remain). Damage found is remembered: writes wait for
    a repair or a rebuild."""
    with Errors(as_json), open_kb(config) as kb:
        checked = kb.verify(repair=repair)
    if as_json:
        emit({"ok": checked.ok, "problems": list(checked.problems),
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
    with Errors(as_json), open_kb(config) as kb:
        if list_erasures:
            kept = kb.erasures()
            if as_json:
                emit({"erasures": [{"pattern": e.pattern, "created": e.created,
                                     "key_hash": e.key_hash} for e in kept]})
            else:
                typer.echo("\n".join(
                    f"{e.created}  {one_line(e.pattern)}"
                    + ("  (an exact key; only its hash is kept)" if e.key_hash else "")
                    for e in kept) or "no erasures")
            return
        assert pattern is not None
        if undo:
            kb.unerase(pattern)
            if as_json:
                emit({"unerased": pattern})
            else:
                typer.echo(f"forgot the erasure {one_line(pattern)}; the next sync indexes "
                           "its documents again")
            return
        gone = kb.erase(pattern).documents
    if as_json:
        emit({"erased": [{"source": d.source, "key": d.key} for d in gone]})
    else:
        typer.echo(f"erased {len(gone)} document(s); later syncs skip {one_line(pattern)} "
                   "(`kbsync erase --undo` forgets it)")


@app.command()
def rebuild(config: ConfigOption = Path("."), as_json: JsonOption = False) -> None:
    """Build a fresh store from the sources, keeping every readable cached embedding, and put
    it in place of the old one (kept beside it as <store>.before-rebuild)."""
    done: list[Rebuilt] = []

    def run(tick: Progress | None) -> SyncResult:
        done.append(kb.rebuild(progress=tick))
        return done[0].result

    with Errors(as_json), open_kb(config) as kb:
        report = progress_run(run, as_json)
    rebuilt = done[0]
    computed = sum(s.embeddings_computed for s in report.sources)
    if as_json:
        emit({**report.to_dict(), "salvaged_embeddings": rebuilt.salvaged,
               "reused_embeddings": rebuilt.reused, "backup": str(rebuilt.backup)})
    else:
        print_report(report, as_json)
        typer.echo(f"rebuilt: {rebuilt.salvaged} cached embeddings kept, {rebuilt.reused} "
                   f"reused, {computed} computed; the old store is kept as {rebuilt.backup}")
    if report.failed:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def gc(config: ConfigOption = Path("."), as_json: JsonOption = False) -> None:
    """Drop cache entries and texts nothing refers to, and compact the store."""
    with Errors(as_json), open_kb(config) as kb:
        removed = dict(kb.gc().removed)
    if as_json:
        emit(removed)
    else:
        # "removed: embeddings 799, chunk texts 1": no noun to agree with a count.
        typer.echo("removed: " + ", ".join(f"{k.replace('_', ' ')} {v:,}"
                                           for k, v in removed.items()))
