"""Figures of a chunking run, gathered while chunks stream past."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from kbsync.model import Boundary, Chunk, ChunkingDiagnostics

__all__ = ["diagnose"]


def diagnose(
    chunks: Iterable[Chunk], *, strategy: str, chunker_id: str, params_hash: str,
    normalizer_version: int, token_counter: str, snapping: bool,
) -> ChunkingDiagnostics:
    """Diagnostics of ``chunks``: counts per boundary kind and the token-size distribution."""
    sizes: list[int] = []
    kinds = dict.fromkeys(Boundary, 0)
    snapped = 0
    for chunk in chunks:
        sizes.append(chunk.token_count)
        kinds[chunk.boundary] += 1
        snapped += chunk.snapped
    arr = np.asarray(sizes, dtype=np.int64)

    def pct(q: float) -> int:
        return int(np.percentile(arr, q, method="nearest")) if len(arr) else 0

    return ChunkingDiagnostics(
        strategy=strategy,
        chunker_id=chunker_id,
        params_hash=params_hash,
        normalizer_version=normalizer_version,
        token_counter=token_counter,
        snapping=snapping,
        chunk_count=len(sizes),
        tokens_total=int(arr.sum()),
        tokens_min=int(arr.min()) if len(arr) else 0,
        tokens_p50=pct(50),
        tokens_p95=pct(95),
        tokens_max=int(arr.max()) if len(arr) else 0,
        tokens_mean=float(arr.mean()) if len(arr) else 0.0,
        primary_cuts=kinds[Boundary.PRIMARY],
        backup_cuts=kinds[Boundary.BACKUP],
        hard_cuts=kinds[Boundary.HARD],
        forced_cuts=kinds[Boundary.FORCED],
        final_cuts=kinds[Boundary.FINAL],
        snapped_cuts=snapped,
    )
