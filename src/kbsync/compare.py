"""Change reports between two versions of a document, over byte-level CDC chunks."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from dataclasses import replace

import numpy as np

from kbsync.chunking.bytecdc import byte_chunks
from kbsync.chunking.params import ByteParams
from kbsync.model import ByteChunk, ChangeReport, Region, Verdict
from kbsync.normalize import normalize

__all__ = ["COSMETIC_SIMILARITY", "REEXAMINE_SIMILARITY", "compare"]

COSMETIC_SIMILARITY = 0.98
REEXAMINE_SIMILARITY = 0.05


def compare(
    old: str | bytes, new: str | bytes, params: ByteParams | None = None,
    *, ignore: Collection[str] = (),
) -> ChangeReport:
    """What changed from ``old`` to ``new``.

    Similarity is the Jaccard index of the two sets of chunk digests; regions are
    the merged runs of new chunks not found in the old version, in characters
    when ``new`` is text and in bytes otherwise; ``moved`` counts kept chunks that
    left the longest run of kept chunks in their old order. Passages in
    ``ignore`` (boilerplate, in normalized form) are removed from both normalized
    texts before the similarity and the verdict are computed; the regions still
    index ``new`` as given.
    """
    report = _compare(old, new, params)
    if not ignore or not isinstance(old, str) or not isinstance(new, str) or not report.changed:
        return report
    stripped = _compare(_without(normalize(old).text, ignore),
                        _without(normalize(new).text, ignore), params)
    return replace(report, similarity=stripped.similarity,
                   verdict=_verdict(stripped.changed, stripped.similarity))


def _without(text: str, passages: Collection[str]) -> str:
    for passage in sorted(passages, key=len, reverse=True):
        text = text.replace(passage, "")
    return text


def _compare(old: str | bytes, new: str | bytes, params: ByteParams | None) -> ChangeReport:
    old_bytes = old.encode("utf-8") if isinstance(old, str) else old
    new_bytes = new.encode("utf-8") if isinstance(new, str) else new
    old_chunks = byte_chunks(old_bytes, params)
    new_chunks = byte_chunks(new_bytes, params)
    old_digests = {c.digest for c in old_chunks}
    new_digests = {c.digest for c in new_chunks}
    union = old_digests | new_digests
    similarity = len(old_digests & new_digests) / len(union) if union else 1.0
    added = tuple(c for c in new_chunks if c.digest not in old_digests)
    removed = tuple(c for c in old_chunks if c.digest not in new_digests)
    kept = len(new_chunks) - len(added)
    regions = _merge(added)
    if isinstance(new, str) and not new.isascii():
        regions = _to_chars(regions, new_bytes)
    changed = old_bytes != new_bytes
    return ChangeReport(
        changed=changed,
        similarity=similarity if changed else 1.0,
        added=added,
        removed=removed,
        kept=kept,
        moved=kept - _ordered(old_chunks, new_chunks),
        regions=regions,
        verdict=_verdict(changed, similarity),
    )


def _verdict(changed: bool, similarity: float) -> Verdict:
    if not changed:
        return Verdict.UNCHANGED
    if similarity >= COSMETIC_SIMILARITY:
        return Verdict.COSMETIC
    if similarity <= REEXAMINE_SIMILARITY:
        return Verdict.REEXAMINE_EXTRACTION
    return Verdict.REPROCESS


def _merge(chunks: tuple[ByteChunk, ...]) -> tuple[Region, ...]:
    regions: list[Region] = []
    for c in chunks:
        if regions and regions[-1].end == c.offset:
            regions[-1] = Region(regions[-1].offset, regions[-1].length + c.length)
        else:
            regions.append(Region(c.offset, c.length))
    return tuple(regions)


def _to_chars(regions: tuple[Region, ...], data: bytes) -> tuple[Region, ...]:
    b = np.frombuffer(data, dtype=np.uint8)
    char_at = np.zeros(len(b) + 1, dtype=np.int64)
    np.cumsum((b & 0xC0) != 0x80, out=char_at[1:])
    out = []
    for r in regions:
        a, z = int(char_at[r.offset]), int(char_at[r.end])
        out.append(Region(a, z - a))
    return tuple(out)


def _ordered(old: list[ByteChunk], new: list[ByteChunk]) -> int:
    """Length of the longest run of kept chunks that appear in the same order in both."""
    first: dict[str, int] = {}
    for c in old:
        first.setdefault(c.digest, c.index)
    tails: list[int] = []
    for c in new:
        i = first.get(c.digest)
        if i is None:
            continue
        k = bisect_left(tails, i)
        if k == len(tails):
            tails.append(i)
        else:
            tails[k] = i
    return len(tails)
