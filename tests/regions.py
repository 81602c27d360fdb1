"""Chunks that lie inside a region of words: what the locality bounds of the strictly local
strategies are stated over."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from kbsync import chunk_text, normalize


def interior_chunks(text: str, strategy: str, params: dict[str, Any], first: int,
                    last: int) -> set[tuple[int, str]]:
    """Chunks of ``text`` within its words first..last-1, keyed by their start relative to
    ``first``."""
    starts = normalize(text).word_starts.tolist()
    out = set()
    for c in chunk_text(text, strategy=strategy, **params).chunks:  # type: ignore[arg-type]
        a = bisect_right(starts, c.start) - 1
        b = a + len(c.text.split())
        if first <= a and b <= last:
            out.add((a - first, c.text))
    return out
