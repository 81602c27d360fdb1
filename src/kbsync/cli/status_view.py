"""``kbsync status``'s output: the status of a knowledge base as lines for people, or as JSON.

It imports no Typer, so that :mod:`kbsync.cli.quick` can run the command without it; the
Typer command (:func:`kbsync.cli.read_commands.status`) runs the same function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbsync.cli.output import echo, emit, failed, warn
from kbsync.terminal import printable

__all__ = ["show_status", "status_text"]

# Failures of the last sync that the status lists for people (--json has them all).
_STATUS_FAILURES = 10


def show_status(config: Path, *, as_json: bool, debug: bool = False) -> int:
    """Print the status of the knowledge base of ``config`` (as JSON with ``as_json``); the
    command's exit code (an error said as :func:`~kbsync.cli.output.failed` says it)."""
    from kbsync.app.status import read_status  # the store's reads only: a quick start

    try:
        found = read_status(config)
        data = found.to_dict()
    except BaseException as exc:
        code = failed(exc, as_json=as_json, debug=debug)
        if code is None:
            raise
        return code
    warn([found.damage])
    if as_json:
        emit(data)
    else:
        echo(printable(status_text(data)))
    return 0


def status_text(data: dict[str, Any]) -> str:
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
    lines += [f"vectors:    {line}" for line in data.get("vector_search", ())]
    last = data["last_run"]
    if last is None and data["documents"] and not data.get("writer"):
        # A sync records its run when it ends: one killed before then left its batches.
        lines.append("last sync:  none recorded; a sync stopped before its end applied "
                     "these documents (the next sync goes on from them)")
    elif last is None:
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
    still = last.get("still_failing", []) if last is not None else []
    for failure in still[:_STATUS_FAILURES]:
        lines.append(f"  still failing: {failure['key']} ({failure['source']}): "
                     f"{failure['message']}")
    if len(still) > _STATUS_FAILURES:
        lines.append(f"  and {len(still) - _STATUS_FAILURES} more still failing "
                     "(kbsync status --json lists them)")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
