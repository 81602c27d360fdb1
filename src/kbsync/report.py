"""Renderings of results: plain dictionaries for ``--json`` and rich tables for people."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from rich.table import Table
from rich.text import Text

from kbsync.model import Chunk, ChunkingDiagnostics, Region
from kbsync.store import Hit

__all__ = [
    "chunk_dict",
    "chunks_table",
    "diagnostics_dict",
    "diagnostics_table",
    "highlighted",
    "hit_dict",
    "hits_table",
    "sync_tables",
]


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


def sync_tables(data: Mapping[str, Any]) -> list[Table]:
    """Tables of a sync (or plan) report given as :func:`kbsync.sync.report_dict` data."""
    title = "Plan (nothing written)" if data["dry_run"] else "Sync report"
    docs = Table(title=title, title_justify="left")
    for name in ("source", "new", "modified", "metadata-only", "moved", "deleted", "unchanged",
                 "failed"):
        docs.add_column(name, justify="left" if name == "source" else "right")
    work = Table(title="Work", title_justify="left")
    for name in ("source", "bytes read", "bytes skipped", "chunks kept", "moved", "added",
                 "deleted", "embeddings computed", "reused", "embed tokens"):
        work.add_column(name, justify="left" if name == "source" else "right")
    for s in data["sources"]:
        d, c = s["documents"], s["chunks"]
        docs.add_row(s["source"], *(str(d.get(k, 0)) for k in (
            "new", "modified", "metadata-only", "moved", "deleted", "unchanged", "failed")))
        work.add_row(s["source"], f"{s['bytes_read']:,}", f"{s['bytes_skipped']:,}",
                     *(str(c.get(k, 0)) for k in ("kept", "moved", "added", "deleted")),
                     str(s["embeddings_computed"]), str(s["embeddings_reused"]),
                     f"{s['embedding_tokens']:,}")
    times = Table(title="Seconds per stage", title_justify="left", show_header=False)
    times.add_column("stage")
    times.add_column("seconds", justify="right")
    for stage, seconds in data["seconds"].items():
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
