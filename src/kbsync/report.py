"""The report of a run, and renderings of results: JSON-ready dictionaries and rich tables.

:class:`SyncResult` is the one form of a sync's (or plan's) report: what the
API returns, what ``--json`` prints and what the store keeps for the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.table import Table
from rich.text import Text

from kbsync.model import ChangeReport, Chunk, ChunkingDiagnostics, Region
from kbsync.store import Hit

__all__ = [
    "DocumentChange",
    "SourceResult",
    "SyncResult",
    "chunk_dict",
    "chunks_table",
    "diagnostics_dict",
    "diagnostics_table",
    "highlighted",
    "hit_dict",
    "hits_table",
    "sync_tables",
]


@dataclass(frozen=True, slots=True)
class DocumentChange:
    """One document a sync touched: the action taken and, for an edit, how its text changed."""

    key: str
    action: str
    change: ChangeReport | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: the action, and for an edit its verdict, similarity and regions."""
        out: dict[str, Any] = {"key": self.key, "action": self.action}
        if self.change is not None:
            out |= {"verdict": str(self.change.verdict),
                    "similarity": round(self.change.similarity, 4),
                    "regions": [{"offset": r.offset, "length": r.length}
                                for r in self.change.regions]}
        return out


@dataclass(frozen=True, slots=True)
class SourceResult:
    """What one sync (or plan) did to one source.

    ``documents`` counts documents per action (``new``, ``modified``, ``deleted``...),
    ``chunks`` counts chunks per fate (``kept``, ``moved``, ``added``, ``deleted``);
    both read 0 for a name they do not hold. ``changes`` lists the documents the
    run acted on, with the text change of each edit. ``changes``, ``failures``
    and ``warnings`` name at most 10,000 each (``kbsync.sync.REPORT_LIMIT``), so
    that a report does not grow with the source; ``omitted`` counts what each left
    out (only those that left something out).
    A source whose listing failed (``listing_complete`` false) deleted nothing.
    """

    source: str
    documents: Mapping[str, int]
    chunks: Mapping[str, int]
    bytes_read: int
    bytes_skipped: int
    skipped_unsupported: int
    embeddings_computed: int
    embeddings_reused: int
    embedding_tokens: int
    embeddings_truncated: int
    embeddings_backfill: int
    boilerplate_chunks: int
    vectors_upserted: int
    vectors_deleted: int
    listing_complete: bool
    deletions_blocked: bool
    failures: tuple[tuple[str, str], ...]
    """``(key, message)`` of each document that failed; the key is empty for the listing."""
    warnings: tuple[str, ...]
    changes: tuple[DocumentChange, ...]
    omitted: Mapping[str, int] = field(default_factory=dict)
    embeddings_to_compute: int = 0
    """Chunks the plan found no cached vector for (what a plan says a sync will embed)."""
    documents_applied: int = 0
    """Documents written to the store (short of the counts when the run was interrupted)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data, as stored in the run's report."""
        return {
            "source": self.source,
            "documents": dict(self.documents),
            "chunks": dict(self.chunks),
            "bytes_read": self.bytes_read,
            "bytes_skipped": self.bytes_skipped,
            "skipped_unsupported": self.skipped_unsupported,
            "embeddings_computed": self.embeddings_computed,
            "embeddings_to_compute": self.embeddings_to_compute,
            "documents_applied": self.documents_applied,
            "embeddings_reused": self.embeddings_reused,
            "embedding_tokens": self.embedding_tokens,
            "embeddings_truncated": self.embeddings_truncated,
            "embeddings_backfill": self.embeddings_backfill,
            "boilerplate_chunks": self.boilerplate_chunks,
            "vectors_upserted": self.vectors_upserted,
            "vectors_deleted": self.vectors_deleted,
            "listing_complete": self.listing_complete,
            "deletions_blocked": self.deletions_blocked,
            "failures": [{"key": k, "message": m} for k, m in self.failures],
            "warnings": list(self.warnings),
            "changes": [c.to_dict() for c in self.changes],
            "omitted": dict(self.omitted),
        }


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The report of one sync, or of a plan (``dry_run``: what a sync would do).

    ``documents`` sums the document actions over sources; ``seconds`` is the time
    spent per stage; ``diagnostics`` describes the chunks made in this run.
    """

    dry_run: bool
    started: str
    finished: str
    documents: Mapping[str, int]
    sources: tuple[SourceResult, ...]
    seconds: Mapping[str, float]
    diagnostics: ChunkingDiagnostics | None
    embedder: str = ""
    """The embedder's identity (a later plan measures its rate from this run)."""

    @property
    def failed(self) -> bool:
        """Whether a document failed, a listing was incomplete or deletions were blocked."""
        return any(s.failures or s.deletions_blocked or not s.listing_complete
                   for s in self.sources)

    def total(self, action: str) -> int:
        """How many documents took ``action`` (e.g. ``"new"``), over every source."""
        return self.documents.get(action, 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: what ``--json`` prints and the store keeps for the run."""
        return {
            "dry_run": self.dry_run,
            "started": self.started,
            "finished": self.finished,
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
            "documents": dict(self.documents),
            "sources": [s.to_dict() for s in self.sources],
            "diagnostics": diagnostics_dict(self.diagnostics) if self.diagnostics else None,
            "embedder": self.embedder,
        }


def diagnostics_dict(d: ChunkingDiagnostics) -> dict[str, Any]:
    """Diagnostics as a JSON-ready dictionary (with the derived hard-cut rate)."""
    return {**asdict(d), "hard_cut_rate": d.hard_cut_rate}


def chunk_dict(c: Chunk) -> dict[str, Any]:
    """A chunk as a JSON-ready dictionary."""
    return {**asdict(c), "boundary": str(c.boundary)}


def diagnostics_table(d: ChunkingDiagnostics, title: str = "Chunking diagnostics") -> Table:
    """A two-column table of the figures of a chunking run."""
    table = Table(title=title, show_header=False, title_justify="left")
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
            f"forced {d.forced_cuts} · final {d.final_cuts}",
        ),
        ("hard-cut rate", f"{d.hard_cut_rate:.2%}"),
    ]
    if d.snapping:
        rows.append(("snapped cuts", f"{d.snapped_cuts}"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def chunks_table(chunks: tuple[Chunk, ...], title: str) -> Table:
    """One row per chunk: offsets, size, boundary kind, identity prefix and first words."""
    table = Table(title=title, title_justify="left")
    for name, justify in (("#", "right"), ("start", "right"), ("end", "right"),
                          ("tokens", "right"), ("boundary", "left"), ("identity", "left"),
                          ("first words", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for c in chunks:
        words = " ".join(c.text.split()[:8])
        table.add_row(str(c.index), str(c.start), str(c.end), str(c.token_count),
                      str(c.boundary), c.identity[:12], words)
    return table


def sync_tables(report: SyncResult) -> list[Table]:
    """Tables of a sync (or plan): documents per action, work done, seconds per stage."""
    title = "Plan (nothing written)" if report.dry_run else "Sync report"
    docs = Table(title=title, title_justify="left")
    for name in ("source", "new", "modified", "metadata-only", "moved", "deleted", "unchanged",
                 "failed"):
        docs.add_column(name, justify="left" if name == "source" else "right")
    work = Table(title="Work", title_justify="left")
    for name in ("source", "bytes read", "bytes skipped", "chunks kept", "moved", "added",
                 "deleted", "to embed" if report.dry_run else "embeddings computed", "reused",
                 "embed tokens"):
        work.add_column(name, justify="left" if name == "source" else "right")
    for s in report.sources:
        d, c = s.documents, s.chunks
        docs.add_row(s.source, *(str(d.get(k, 0)) for k in (
            "new", "modified", "metadata-only", "moved", "deleted", "unchanged", "failed")))
        work.add_row(s.source, f"{s.bytes_read:,}", f"{s.bytes_skipped:,}",
                     *(str(c.get(k, 0)) for k in ("kept", "moved", "added", "deleted")),
                     str(s.embeddings_to_compute if report.dry_run else s.embeddings_computed),
                     str(s.embeddings_reused),
                     f"{s.embedding_tokens:,}")
    omitted = sum(s.omitted.get("changes", 0) for s in report.sources)
    if omitted:
        docs.caption = (f"The report names the first changes of each source; {omitted:,} "
                        "more are counted only.")
    times = Table(title="Seconds per stage", title_justify="left", show_header=False)
    times.add_column("stage")
    times.add_column("seconds", justify="right")
    for stage, seconds in report.seconds.items():
        times.add_row(stage, f"{seconds:.3f}")
    return [docs, work, times]


def hits_table(hits: Sequence[Hit]) -> Table:
    """Search results: rank, score, document key, heading and the chunk text."""
    table = Table(title="Results", title_justify="left", show_lines=True)
    for name in ("#", "score", "document", "heading", "text"):
        table.add_column(name, justify="right" if name in ("#", "score") else "left")
    for rank, hit in enumerate(hits, 1):
        shown = hit.context or hit.text
        text = shown if len(shown) <= 400 else shown[:400] + "…"
        table.add_row(str(rank), f"{hit.score:.4f}", hit.key, hit.heading or "", text)
    return table


def hit_dict(hit: Hit) -> dict[str, Any]:
    """A search hit as a JSON-ready dictionary."""
    return asdict(hit)


def highlighted(text: str, regions: Sequence[Region], context: int = 200) -> Text:
    """``text`` with the changed regions highlighted, cut to some context around them."""
    out = Text()
    last = 0
    for r in regions:
        start = max(last, r.offset - context)
        if start > last:
            out.append("…\n" if last else "…", style="dim")
        out.append(text[start : r.offset])
        out.append(text[r.offset : r.end], style="black on yellow")
        last = r.end
    tail_end = min(len(text), last + context)
    out.append(text[last:tail_end])
    if tail_end < len(text):
        out.append("…", style="dim")
    return out
