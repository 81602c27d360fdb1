"""Renderings of results: plain dictionaries for ``--json`` and rich tables for people."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.table import Table

from kbsync.model import Chunk, ChunkingDiagnostics

__all__ = ["chunk_dict", "chunks_table", "diagnostics_dict", "diagnostics_table"]


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
