"""What the command line shows people: rich renderables of reports, chunks, hits and changes.

Rich lives on this side of the library only. Every string here that can come from
a document or a configuration (text, heading, title, key, URL, file or source name)
enters a :class:`rich.text.Text` through :func:`safe`, never a markup string: so
``[/usr/bin]`` or ``[bold]`` in a document is printed as it is written, and its control
characters as visible escapes (:func:`kbsync.terminal.printable`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from kbsync.core.plan import Action
from kbsync.model import ChangeReport, Chunk, ChunkingDiagnostics, Region
from kbsync.report import SourceResult, SyncResult
from kbsync.store import Hit
from kbsync.terminal import printable

__all__ = [
    "HIT_CHARS",
    "change_lines",
    "chunks_table",
    "diagnostics_table",
    "diff_heading",
    "edit_summary",
    "highlighted",
    "hit_blocks",
    "no_op_line",
    "nothing_changed",
    "racy_note",
    "rounded_down",
    "safe",
    "still_failing_lines",
    "sync_tables",
]

HIT_CHARS = 600
"""The most characters of a hit's text shown (``--json`` has all of it)."""
_FIRST_WORDS = 48
_ACTIONS = tuple(a.value for a in Action)
"""The columns of a report's documents table, in the order :class:`Action` lists them."""

def safe(text: str, style: str = "", *, one_line: bool = False) -> Text:
    """``text`` as rich ``Text``: no markup is read in it, and its control characters
    are visible escapes (all of them, newlines and tabs too, with ``one_line``)."""
    return Text(printable(text, one_line=one_line), style=style)


def _cells(*values: str) -> list[Text]:
    return [safe(v, one_line=True) for v in values]


def diagnostics_table(d: ChunkingDiagnostics, title: str = "Chunking diagnostics") -> Table:
    """A two-column table of the figures of a chunking run."""
    table = Table(title=safe(title, one_line=True), show_header=False, title_justify="left")
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    rows = [
        ("chunker", f"{d.chunker_id} (params {d.params_hash[:12]})"),
        ("normalizer", f"v{d.normalizer_version}"),
        ("token counter", d.token_counter),
        ("snapping", "on" if d.snapping else "off"),
        ("chunks", f"{d.chunk_count:,}"),
        ("tokens", f"{d.tokens_total:,}"),
        (
            "tokens per chunk",
            f"min {d.tokens_min} · p50 {d.tokens_p50} · p95 {d.tokens_p95} · "
            f"max {d.tokens_max} · mean {d.tokens_mean:.1f}",
        ),
        (
            "cuts",
            f"primary {d.primary_cuts} · backup {d.backup_cuts} · hard {d.hard_cuts} · "
            f"forced {d.forced_cuts} · final {d.final_cuts}"
            + (f" · tail {d.tail_cuts}" if d.tail_cuts else ""),
        ),
        ("hard-cut rate", f"{d.hard_cut_rate:.2%}"),
    ]
    if d.snapping:
        rows.append(("snapped cuts", f"{d.snapped_cuts}"))
    for name, value in rows:
        table.add_row(*_cells(name, value))
    return table


def chunks_table(chunks: tuple[Chunk, ...], title: str) -> Table:
    """One row per chunk: offsets, size, boundary kind, identity prefix and first words.

    The figures keep their width; the first words (at most ~50 characters) wrap in
    what is left, so a row stays a line or two on a terminal of 80 columns.
    """
    rows = []
    for c in chunks:
        words = " ".join(c.text.split()[:8])
        if len(words) > _FIRST_WORDS:
            words = words[:_FIRST_WORDS] + "…"
        rows.append((str(c.index), str(c.start), str(c.end), str(c.token_count),
                     str(c.boundary), c.identity[:12], words))
    table = Table(title=safe(title, one_line=True), title_justify="left")
    names = ("#", "start", "end", "tokens", "boundary", "identity")
    for i, name in enumerate(names):
        # The figures keep their full width; only the first words give way.
        width = max([len(name), *(len(row[i]) for row in rows)])
        table.add_column(name, justify="left" if i >= 4 else "right", no_wrap=True,
                         width=width)
    # The first words wrap (a long word folds): a line or two, never a cut figure.
    table.add_column("first words", overflow="fold")
    for row in rows:
        table.add_row(*_cells(*row))
    return table


class _Fitting:
    """A table with a row per source, or, where that is wider than the terminal, the same
    table turned: a row per figure and a column per source (numbers are never cut)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table
        wide = Measurement.get(console, options.update(max_width=10_000), table).maximum
        if wide <= options.max_width:
            yield table
            return
        first, *figures = table.columns
        turned = Table(title=table.title, caption=table.caption, title_justify="left")
        turned.add_column(first.header)
        for name in first.cells:
            turned.add_column(name, justify="right")
        for column in figures:
            turned.add_row(column.header, *column.cells)
        yield turned


def sync_tables(report: SyncResult) -> list[RenderableType]:
    """Tables of a sync (or plan): documents per action, work done, seconds per stage."""
    title = "Plan (nothing written)" if report.dry_run else "Sync report"
    docs = Table(title=title, title_justify="left")
    for name in ("source", *_ACTIONS):
        docs.add_column(name, justify="left" if name == "source" else "right")
    work = Table(title="Work", title_justify="left")
    # "moved" chunks (ChunkOps.moved) are chunks of a document found at another place in
    # it; a moved document's chunks count as kept. The header says so.
    for name in ("source", "bytes read", "bytes skipped", "chunks kept", "moved in doc", "added",
                 "deleted", "to embed" if report.dry_run else "embeddings computed", "reused",
                 "embed tokens"):
        work.add_column(name, justify="left" if name == "source" else "right")
    notes: list[RenderableType] = []
    for s in report.sources:
        if _unlisted(s):  # zeros would read as "nothing changed" rather than "not looked at"
            docs.add_row(*_cells(s.source, *["—"] * (len(docs.columns) - 1)))
            work.add_row(*_cells(s.source, *["—"] * (len(work.columns) - 1)))
            held = s.deletions_held
            kept = ("" if not held else "; its document is kept" if held == 1
                    else f"; its {held:,} documents are kept")
            notes.append(safe(f"{s.source}: not listed (the error is below); nothing of it "
                              f"was read, changed or deleted{kept}"))
            continue
        d, c = s.documents, s.chunks
        docs.add_row(*_cells(s.source, *(f"{d.get(k, 0):,}" for k in _ACTIONS)))
        embedded = s.embeddings_to_compute if report.dry_run else s.embeddings_computed
        work.add_row(*_cells(s.source, f"{s.bytes_read:,}", f"{s.bytes_skipped:,}",
                             *(f"{c.get(k, 0):,}" for k in ("kept", "moved", "added", "deleted")),
                             f"{embedded:,}", f"{s.embeddings_reused:,}",
                             f"{s.embedding_tokens:,}"))
        if s.skipped_unsupported:
            notes.append(unsupported_note(s))
    if any(s.embeddings_reused for s in report.sources):
        # A first sync reuses too: a text that several chunks share is embedded once.
        work.caption = ("reused: chunks whose text has a vector, cached or embedded once "
                        "in this run for another chunk of the same text")
    omitted = sum(s.omitted.get("changes", 0) for s in report.sources)
    if omitted:
        docs.caption = (f"The report names the first changes of each source; {omitted:,} "
                        "more are counted only.")
    times = Table(title="Seconds per stage", title_justify="left", show_header=False)
    times.add_column("stage")
    times.add_column("seconds", justify="right")
    for stage, seconds in report.seconds.items():
        if seconds >= 0.0005:  # a stage with nothing to do (no index to end) reads 0.000
            times.add_row(*_cells(stage, f"{seconds:.3f}"))
    return [_Fitting(docs), _Fitting(work), times, *notes]


def nothing_changed(report: SyncResult) -> bool:
    """Whether a run changed nothing and met no new problem: every document listed was
    unchanged (or still failing as before), nothing was embedded, written or warned of."""
    if any(n for action, n in report.documents.items() if action != Action.UNCHANGED.value):
        return False
    return not any(
        s.failures or s.warnings or not s.listing_complete or s.deletions_blocked
        or s.embeddings_computed or s.embeddings_to_compute or s.embeddings_backfill
        or s.vectors_upserted
        or s.vectors_deleted or any(s.chunks.values()) for s in report.sources)


STILL_FAILING_NAMED = 3
"""Documents still failing that the line of a run that changed nothing names."""


def no_op_line(report: SyncResult, seconds: float | None = None) -> str:
    """The one line of a run that changed nothing (:func:`nothing_changed`), or of a plan
    that would change nothing.

    ``seconds`` is the wall time the command took (its start, the store opened, a model
    loaded, the run, its record): what the person waiting saw. Without it, the sum of the
    report's stages, which leave that out.
    """
    unchanged = report.total(Action.UNCHANGED.value)
    sources = len(report.sources)
    if seconds is None:
        seconds = sum(report.seconds.values())
    erased = sum(s.skipped_erased for s in report.sources)
    racy = sum(s.racy_rereads for s in report.sources)
    said = "nothing to do" if report.dry_run else "nothing changed"
    line = (f"{said}: {unchanged:,} document{'' if unchanged == 1 else 's'} "
            f"unchanged{f', {erased:,} erased, skipped' if erased else ''}"
            f"{f', {racy_note(racy)}' if racy else ''} in {sources} "
            f"source{'' if sources == 1 else 's'} ({seconds:.2f} s)")
    failing = [key for s in report.sources for key, _ in s.still_failing]
    if failing:
        named = ", ".join(failing[:STILL_FAILING_NAMED])
        more = len(failing) - STILL_FAILING_NAMED
        line += (f"; {len(failing):,} still failing as before, not read: {named}"
                 f"{f' and {more:,} more' if more > 0 else ''} (`kbsync sync --verify` "
                 "reads them again)")
    return printable(line, one_line=True)


def racy_note(rereads: int) -> str:
    """Why a sync read documents whose stat is unchanged: their modification time was too
    close to a listing to trust (``SourceResult.racy_rereads``)."""
    return f"re-read {rereads:,} (modified within the clock's resolution)"


def still_failing_lines(report: SyncResult) -> list[Text]:
    """One line per document that failed as it is in an earlier sync, not read again."""
    return [Text.assemble("still failing (not read, unchanged since): ",
                          safe(f"{s.source}:{key}", "bold", one_line=True), ": ",
                          safe(message, one_line=True))
            for s in report.sources for key, message in s.still_failing]


UNSUPPORTED_NAMED = 5
"""Skipped files of unsupported types a report's text names; ``--json`` names them all."""


def unsupported_note(s: SourceResult) -> Text:
    """The files of ``s`` skipped because no extractor reads their type, the first few named."""
    n = s.skipped_unsupported
    named = s.unsupported[:UNSUPPORTED_NAMED]
    more = n - len(named)
    files = "file was" if n == 1 else "files were"
    line = f"{s.source}: {n:,} {files} skipped, of a type no extractor reads"
    if named:  # a report stored by an older version counts them without names
        line += ": " + ", ".join(named) + (f" and {more:,} more" if more else "")
    return safe(line, one_line=True)


def _unlisted(s: SourceResult) -> bool:
    """Whether the source's listing failed before any document of it was looked at."""
    return (not s.listing_complete and not any(s.documents.values())
            and any(not key for key, _ in s.failures))


NEW_LISTED = 20
"""New (or re-chunked) documents a run's text report names one by one; more are only
counted: a first sync or a chunker change touches every document."""
_BULK = ("new", "rechunked")


def change_lines(report: SyncResult) -> list[Text]:
    """One line per document a run changed: ``action key (source)``, and for an edit its
    verdict, kind and reason, similarity and regions; new documents are named when there
    are few."""
    lines: list[Text] = []
    for s in report.sources:
        many = Counter(c.action for c in s.changes if c.action in _BULK)
        for c in s.changes:
            if c.action in ("unchanged", "failed") or many[c.action] > NEW_LISTED:
                continue
            line = Text.assemble(f"{c.action} ", safe(c.key, "bold", one_line=True), " (",
                                 safe(s.source, one_line=True), ")")
            if c.moved_from is not None:
                line.append_text(Text.assemble(", from ", safe(c.moved_from, one_line=True)))
            if c.change is not None:
                line.append(": ")
                line.append_text(safe(edit_summary(c.change), one_line=True))
            lines.append(line)
        for action, count in many.items():
            if count > NEW_LISTED:
                lines.append(Text.assemble(f"{action}: {count:,} documents (", safe(s.source),
                                           "; --json names them)"))
    return lines


def hit_blocks(hits: Sequence[Hit]) -> RenderableType:
    """Search results as blocks that read at any width: a line with the rank,
    ``key › heading`` (the title where there is no heading; ``key (source)`` when the
    hits come from several sources) and the relevance (0 to 1), then the text,
    wrapped and indented."""
    blocks: list[RenderableType] = []
    several = len({hit.source for hit in hits}) > 1
    for n, hit in enumerate(hits, 1):
        rank = hit.rank or n
        head = Text.assemble((f"{rank}.", "bold"), " ", safe(hit.key, "bold cyan", one_line=True))
        if several:
            head.append(" (")
            head.append(safe(hit.source, one_line=True))
            head.append(")")
        if hit.heading or hit.title:
            head.append(" › ")
            head.append(safe(hit.heading or hit.title or "", "bold", one_line=True))
        shown = _reflowed(hit.context or hit.text)
        if len(shown) > HIT_CHARS:
            shown = shown[:HIT_CHARS].rstrip() + "…"
        blocks += [_with_relevance(head, hit.relevance), _Indented(safe(shown), 3)]
    if not blocks:
        return Text("no results", style="dim")
    return Group(*blocks)


def rounded_down(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, rounded down: a top reading (1.00, 1.000) means
    the top of the scale (an exact match, an identical text), not 0.996 or 0.9995.

    The margin absorbs float32 error, in which an exact match's cosine is 0.99999988.
    """
    scale = 10**places
    return f"{math.floor(value * scale + 1e-4) / scale:.{places}f}"


def _with_relevance(head: Text, relevance: float) -> _HitHead:
    """A hit's first line and its relevance (0 to 1, rounded down)."""
    return _HitHead(head, Text(f"relevance {rounded_down(relevance, 2)}", style="dim"))


# Where a hit's head may break when it does not fit: after a space, a slash, a hyphen.
_BREAK_AFTER = frozenset(" /-")


class _HitHead:
    """A hit's rank, key and heading with its relevance: on one line when they fit, else
    folded to the width, breaking after a space, slash or hyphen where one is near (a
    key is what a reader copies: never cut, and the rank stays on the key's line), with
    the relevance, kept whole, at the end of the last line or right-aligned below it."""

    def __init__(self, head: Text, relevance: Text) -> None:
        self.head, self.relevance = head, relevance

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(8, options.max_width)
        gap = 2
        if self.head.cell_len + gap + self.relevance.cell_len <= width:
            lines = [self.head]
        else:
            lines = list(self.head.divide(_breaks(self.head.plain, width)))
        for n, line in enumerate(lines):
            line = line.copy()
            line.rstrip()
            if line.plain.startswith(" "):
                line = line[len(line.plain) - len(line.plain.lstrip(" ")):]
            last = n == len(lines) - 1
            if last and line.cell_len + gap + self.relevance.cell_len <= width:
                line.append(" " * (width - line.cell_len - self.relevance.cell_len))
                line.append_text(self.relevance)
                last = False  # the relevance is placed
            yield from line.render(console)
            yield Segment.line()
            if last:
                yield Segment(" " * max(0, width - self.relevance.cell_len))
                yield from self.relevance.render(console)
                yield Segment.line()


def _breaks(text: str, width: int) -> list[int]:
    """Offsets where ``text`` is cut into lines of at most ``width`` cells: after the last
    space, slash or hyphen that leaves at least half a line, else at the width."""
    offsets: list[int] = []
    start = 0
    while cell_len(text[start:]) > width:
        end, cells = start, 0
        while end < len(text) and cells + cell_len(text[end]) <= width:
            cells += cell_len(text[end])
            end += 1
        cut = next((i + 1 for i in range(end - 1, start + width // 2 - 1, -1)
                    if text[i] in _BREAK_AFTER), end)
        offsets.append(cut)
        start = cut
    return offsets


# A line that starts like this keeps its own line when a hit's text is reflowed.
_OWN_LINE = re.compile(r"\s|[-*+>|#]|```|~~~|\d+[.)]\s")


_FENCE = re.compile(r"\s{0,3}(```|~~~)")


def _reflowed(text: str) -> str:
    """``text`` with the line breaks of hard-wrapped paragraphs made spaces, so it wraps
    to the terminal; blank lines, list items, quotes, tables, indented lines and every
    line of a fenced code block stay.

    A hit's text can start or end inside a code block (a chunk, or a context of 0, cut
    there): with an odd number of fences, a first fence without a language closes a
    block the text started in; else the last fence opens one the text ends in.
    """
    lines = text.strip().split("\n")
    fences = [n for n, line in enumerate(lines) if _FENCE.match(line)]
    code = len(fences) % 2 == 1 and lines[fences[0]].strip() in ("```", "~~~")
    out: list[str] = []
    for n, line in enumerate(lines):
        fence = n in fences
        if out and not code and not fence and line.strip() and out[-1].strip() \
                and not _OWN_LINE.match(line) and not _OWN_LINE.match(out[-1]):
            out[-1] = f"{out[-1].rstrip()} {line.lstrip()}"
        else:
            out.append(line)
        if fence:
            code = not code
    return "\n".join(out)


class _Indented:
    """``text`` wrapped to the width left after ``indent`` spaces, then a blank line; no
    line is padded to the width (as :class:`rich.padding.Padding` would)."""

    def __init__(self, text: Text, indent: int) -> None:
        self.text, self.indent = text, indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(8, options.max_width - self.indent)
        for line in self.text.wrap(console, width, overflow="fold"):
            line.rstrip()
            yield Segment(" " * self.indent)
            yield from line.render(console)
            yield Segment.line()
        yield Segment.line()


def edit_summary(change: ChangeReport) -> str:
    """An edit in a line: ``reprocess (substantive: number 950 → 975), similarity 0.998,
    1 region(s) added, 1 removed`` (no kind for a run recorded before edits had one)."""
    kind = "" if change.kind is None else f" ({change.kind}" + (
        f": {change.reason})" if change.reason else ")")
    return (f"{change.verdict}{kind}, similarity {rounded_down(change.similarity, 3)}, "
            f"{len(change.regions)} region(s) added, {len(change.removed_regions)} removed")


def diff_heading(key: str, source: str, summary: str) -> Text:
    """The first line of ``kbsync diff``: ``key (source), summary``."""
    return Text.assemble(safe(key, "bold", one_line=True), " (", safe(source, one_line=True),
                         "), ", safe(summary, one_line=True))


EXCERPTS = 20
"""Excerpts of a changed text that ``kbsync diff`` shows; more are only counted."""


def highlighted(text: str, regions: Sequence[Region], context: int = 200,
                style: str = "black on yellow", marks: tuple[str, str] = ("", ""),
                limit: int = EXCERPTS) -> Text:
    """``text`` with the changed regions highlighted, in excerpts around them.

    Each excerpt is the region with its line, or up to ``context`` characters on
    either side cut at a word (marked ``…``); excerpts that meet are merged, and
    each starts on a line of its own after a ``⋯`` line. Each piece is made
    printable on its own, after cutting, so the regions' offsets (into the
    document's text) stay right. ``marks`` enclose each region, for output that
    shows no colour (``git diff --word-diff`` style: ``{+…+}``, ``[-…-]``).
    """
    excerpts: list[tuple[int, int, list[Region]]] = []
    for r in sorted(regions, key=lambda r: r.offset):
        start, end = _excerpt(text, r, context)
        if excerpts and start <= excerpts[-1][1] + 1:  # overlapping, or on the next line
            first, last_end, inside = excerpts[-1]
            inside.append(r)
            excerpts[-1] = (first, max(end, last_end), inside)
        else:
            excerpts.append((start, end, [r]))
    out = Text()
    for n, (start, end, inside) in enumerate(excerpts[:limit]):
        if n:
            out.append("\n⋯\n", style="dim")
        if start > 0 and text[start - 1] != "\n":
            out.append("…", style="dim")
        last = start
        for r in inside:
            out.append(printable(text[last : r.offset]))
            out.append(f"{marks[0]}{printable(text[r.offset : r.end])}{marks[1]}", style=style)
            last = r.end
        out.append(printable(text[last:end]))
        if end < len(text) and text[end] != "\n":
            out.append("…", style="dim")
    if len(excerpts) > limit:
        more = sum(len(e[2]) for e in excerpts[limit:])
        out.append(f"\n⋯\n{more:,} more changed region{'s' if more != 1 else ''} not shown "
                   "(`--json` lists them all)", style="dim")
    return out


def _excerpt(text: str, region: Region, context: int) -> tuple[int, int]:
    """The span shown around ``region``: its lines, or ``context`` characters cut at a word."""
    start = max(0, region.offset - context)
    line = text.rfind("\n", max(0, start - 1), region.offset)
    if line >= 0:
        start = line + 1
    elif start > 0:
        space = text.find(" ", start, region.offset)
        start = space + 1 if space >= 0 else start
    end = min(len(text), region.end + context)
    line = text.find("\n", region.end, min(len(text), end + 1))
    if line >= 0:
        end = line
    elif end < len(text):
        space = text.rfind(" ", region.end, end)
        end = space if space >= 0 else end
    return start, end
