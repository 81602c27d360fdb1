"""Commands that sync: plan, sync, worker, watch; progress bars and the report they print."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbsync.cli.base import (
    EXIT_ERROR,
    EXIT_PROBLEMS,
    ConfigOption,
    Errors,
    FailOn,
    FailOnOption,
    JsonOption,
    QuietOption,
    app,
    emit,
    interrupted_exit,
    open_kb,
)
from kbsync.cli.output import command_started
from kbsync.errors import ConfirmationRequiredError
from kbsync.terminal import json_escaped, printable

if TYPE_CHECKING:
    from kbsync.app.knowledge_base import Progress, SyncResult
    from kbsync.sync import RayCluster

__all__ = ["PROGRESS_EVERY", "YES_HELP", "Engine", "plain_progress", "plan", "print_problems",
           "print_report", "progress_run", "ray_cluster", "sync", "watch", "worker"]

YES_HELP = ("Embed even what costs more than the bill guard allows: with a priced API "
            "(openai), more than [index] confirm_above_tokens tokens; with a local model, "
            "longer than [index] confirm_above_seconds at the measured rate; the hashing "
            "embedder never asks.")
"""What ``--yes`` passes, as :func:`kbsync.core.costs.bill_bound` sets the bound."""

PROGRESS_EVERY = 10.0
"""Seconds between the progress lines of a run whose stderr is no terminal (a cron job's
log, ``| tee``): often enough to show the work goes on, seldom enough to read the log."""


def progress_run(run: Callable[[Progress | None], SyncResult], quiet: bool) -> SyncResult:
    """``run(progress)`` with progress bars on stderr; when stderr is no terminal, plain
    lines (:func:`plain_progress`: bars would be carriage returns in a log); none when
    ``quiet``."""
    if quiet:
        return run(None)
    from rich import progress as bars  # only the commands that draw bars pay for it
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        return run(plain_progress(PROGRESS_EVERY))
    with bars.Progress(bars.TextColumn("{task.description}"), bars.BarColumn(),
                       bars.MofNCompleteColumn(), transient=True, console=console) as bar:
        tasks: dict[str, tuple[bars.TaskID, int, int]] = {}  # stage -> task, total, done

        def tick(stage: str, done: int, total: int) -> None:
            # A stage's total is known before its first tick; another total, or a count
            # that starts again, is the next source's: a bar of its own, not one going back.
            task, shown, last = tasks.get(stage, (None, total, done))
            if task is None or total != shown or done < last:
                task = bar.add_task(_described(stage), total=total)
            tasks[stage] = (task, total, done)
            bar.update(task, completed=done, total=total)

        return run(tick)


def plain_progress(every: float) -> Progress:
    """Progress as a line on stderr (``progress: embed 120/757 chunks (15%)``) at most every
    ``every`` seconds: a run that ends sooner prints none."""
    last = time.monotonic()

    def tick(stage: str, done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < every:
            return
        last = now
        share = f" ({done * 100 // total}%)" if total else ""
        unit = _UNIT.get(stage)
        typer.echo(f"progress: {stage} {done:,}/{total:,}{f' {unit}' if unit else ''}{share}",
                   err=True)

    return tick


_UNIT = {"embed": "chunks"}
"""The stages a sync counts in other units than documents (the embedding: in chunks)."""


def _described(stage: str) -> str:
    """A progress bar's label: the stage, and its unit where it is not documents."""
    unit = _UNIT.get(stage)
    return f"{stage} ({unit})" if unit else stage


def print_report(report: SyncResult, as_json: bool, quiet: bool = False,
                 began: float | None = None) -> None:
    """The report on stdout (as JSON, or as tables and lines); its problems on stderr.

    A sync that changed nothing, or a plan that would change nothing, is one line, with the
    wall time since ``began`` (a ``perf_counter`` reading: when the command began);
    ``quiet`` prints only the errors.
    """
    if as_json:
        emit(report.to_dict())
        print_problems(report)
        return
    if quiet:
        print_problems(report, warnings=False)
        return
    from kbsync.cli.render import (
        change_lines,
        diagnostics_table,
        no_op_line,
        nothing_changed,
        racy_note,
        still_failing_lines,
        sync_tables,
    )

    if nothing_changed(report):
        typer.echo(no_op_line(report, None if began is None else time.perf_counter() - began))
        return
    from rich.console import Console

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
        if s.racy_rereads:
            typer.echo(printable(f"{s.source}: {racy_note(s.racy_rereads)}", one_line=True))
        if s.pages_not_due:
            typer.echo(f"{printable(s.source, one_line=True)}: {s.pages_checked} pages checked, "
                       f"{s.pages_not_due} not due (unchanged)")
    for line in change_lines(report) + still_failing_lines(report):
        console.print(line, highlight=False)
    print_problems(report)


def print_problems(report: SyncResult, warnings: bool = True) -> None:
    """Failures and (unless not ``warnings``) warnings of a run, one line each on stderr."""
    for s in report.sources:
        for key, message in s.failures:
            typer.echo(printable(f"error: {s.source}:{key}: {message}" if key
                                 else f"error: {s.source}: {message}"), err=True)
        for warning in s.warnings if warnings else ():
            typer.echo(printable(f"warning: {s.source}: {warning}"), err=True)


class Engine(StrEnum):
    """Where a sync's work runs."""

    LOCAL = "local"
    RAY = "ray"


def ray_cluster(address: str | None, cpus: int) -> RayCluster:
    """The Ray cluster ``--ray-address`` and ``--workers`` name."""
    from kbsync.sync import RayCluster

    return RayCluster(address=address, cpus=cpus)


@app.command()
def plan(
    names: Annotated[list[str] | None, typer.Argument(
        metavar="[SOURCE]...", help="Plan only these sources (by name); all when none.",
        show_default=False)] = None,
    config: ConfigOption = Path("."), as_json: JsonOption = False,
) -> None:
    """Show what a sync would do (documents, chunks to embed, embedding tokens); write nothing.

    Prints one line when a sync would change nothing, else the plan's tables and its cost."""
    began = command_started(time.perf_counter())
    with Errors(as_json), open_kb(config) as kb:
        report = progress_run(lambda tick: kb.plan(progress=tick, sources=names or None),
                              as_json)
        cost = kb.estimate(report)
    if as_json:
        emit({**report.to_dict(), "cost": cost.to_dict()})
    else:
        from kbsync.cli.render import nothing_changed

        print_report(report, as_json, began=began)
        if not nothing_changed(report):  # a plan of nothing to do is its one line
            typer.echo(cost.summary())
            if cost.sync is not None:
                typer.echo(cost.sync.summary())
    if report.failed:  # what the sync would meet: failed documents, an incomplete listing
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def sync(
    names: Annotated[list[str] | None, typer.Argument(
        metavar="[SOURCE]...", help="Sync only these sources (by name); all when none.",
        show_default=False)] = None,
    config: ConfigOption = Path("."),
    verify: Annotated[bool, typer.Option("--verify", help="Read every file, even when its "
                                         "stat is unchanged.")] = False,
    allow_mass_delete: Annotated[bool, typer.Option(
        help="Allow deleting more than half of a source's documents.")] = False,
    wait: Annotated[bool, typer.Option(help="Wait for another writer to finish.")] = True,
    workers: Annotated[int, typer.Option(min=0, help="Process documents in this many processes "
                                         "(PostgreSQL store only); with --engine ray, the "
                                         "CPUs the sync uses.")] = 0,
    engine: Annotated[Engine, typer.Option(help="Where the work runs: in this process (and "
                                           "--workers), or on Ray (the extra 'ray').")
                      ] = Engine.LOCAL,
    ray_address: Annotated[str | None, typer.Option(
        help="With --engine ray: the Ray cluster to join (else RAY_ADDRESS, else a Ray "
             "started on this machine).", show_default=False)] = None,
    accept_replacements: Annotated[bool, typer.Option(
        help="Apply a new text that shares almost nothing with the stored one at once, "
             "instead of waiting for the next sync to confirm it.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help=YES_HELP)] = False,
    due: Annotated[bool, typer.Option("--due", help="Check only the web pages that are due "
                                      "for a revisit; the others count as unchanged.")] = False,
    fail_on: FailOnOption = FailOn.NEW,
    quiet: QuietOption = False,
    accept_root: Annotated[bool, typer.Option(
        "--accept-root", help="Take a folder whose root is on another device than at the "
                              "last sync as moved there on purpose.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Bring the knowledge base in step with its sources.

    Prints one line when nothing changed, else the report's tables. Exits 0, or 4 when
    the run met a new problem (--fail-on any: also for documents still failing).
    """
    began = command_started(time.perf_counter())
    on_ray = engine is Engine.RAY
    if ray_address is not None and not on_ray:
        raise typer.BadParameter("--ray-address goes with --engine ray")
    with Errors(as_json), open_kb(config) as kb:
        def run(tick: Progress | None, confirmed: bool) -> SyncResult:
            return kb.sync(verify=verify, allow_mass_delete=allow_mass_delete, progress=tick,
                           wait=wait, on_wait=lambda message: typer.echo(message, err=True),
                           workers=0 if on_ray else workers, yes=confirmed, due=due,
                           accept_replacements=accept_replacements, sources=names or None,
                           accept_root=accept_root,
                           ray=ray_cluster(ray_address, workers) if on_ray else None)

        try:
            try:
                report = progress_run(lambda tick: run(tick, yes), as_json or quiet)
            except ConfirmationRequiredError as exc:
                if as_json or not sys.stdin.isatty():
                    raise
                typer.echo(str(exc), err=True)
                if not typer.confirm("Embed it all the same?", err=True):
                    raise typer.Exit(EXIT_ERROR) from None
                report = progress_run(lambda tick: run(tick, True), as_json or quiet)
        except KeyboardInterrupt as exc:
            # Ctrl-C or SIGTERM: the run is recorded as interrupted, every embedding kept.
            typer.echo("interrupted: what was applied stays, and every embedding computed is "
                       "cached; `kbsync sync` again finishes the rest", err=True)
            raise interrupted_exit(exc) from None
    print_report(report, as_json, quiet, began=began)
    if report.failed or (fail_on is FailOn.ANY and report.still_failing):
        if quiet and fail_on is FailOn.ANY:  # say why it exits 4
            for s in report.sources:
                for key, message in s.still_failing:
                    typer.echo(printable(f"error: {s.source}:{key}: still failing: "
                                         f"{message}"), err=True)
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
    with Errors(), open_kb(config) as kb:
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
    yes: Annotated[bool, typer.Option("--yes", "-y", help=YES_HELP)] = False,
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
            print_problems(report)

    with Errors(as_json), open_kb(config) as kb:
        try:
            kb.watch(interval=every, full_every=full, on_report=show, yes=yes)
        except KeyboardInterrupt:
            typer.echo("stopped", err=True)
