"""Figures of a chunking run, gathered while chunks stream past."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kbsync.model import Boundary, Chunk, ChunkingDiagnostics

__all__ = ["ChunkShape", "diagnose_tally", "shape_of"]

ChunkShape = tuple[int, Boundary, bool]
"""What diagnostics need of a chunk: its token count, its boundary kind, whether it was snapped."""


def shape_of(chunk: Chunk) -> ChunkShape:
    """The part of ``chunk`` that diagnostics count."""
    return chunk.token_count, chunk.boundary, chunk.snapped


def diagnose_tally(
    tally: Mapping[ChunkShape, int], *, strategy: str, chunker_id: str, params_hash: str,
    normalizer_version: int, token_counter: str, snapping: bool,
) -> ChunkingDiagnostics:
    """Diagnostics of chunks counted by :func:`shape_of`: counts per boundary kind and the
    token-size distribution, without keeping the chunks themselves."""
    kinds = dict.fromkeys(Boundary, 0)
    snapped = 0
    for (_, boundary, was_snapped), n in tally.items():
        kinds[boundary] += n
        snapped += n * was_snapped
    arr = np.repeat(np.asarray([shape[0] for shape in tally], dtype=np.int64),
                    np.asarray(list(tally.values()), dtype=np.int64))

    def pct(q: float) -> int:
        return int(np.percentile(arr, q, method="nearest")) if len(arr) else 0

    return ChunkingDiagnostics(
        strategy=strategy,
        chunker_id=chunker_id,
        params_hash=params_hash,
        normalizer_version=normalizer_version,
        token_counter=token_counter,
        snapping=snapping,
        chunk_count=len(arr),
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
        tail_cuts=kinds[Boundary.TAIL],
    )
