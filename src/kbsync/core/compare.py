"""Change reports between two versions of a document: similarity, kind, verdict, word-exact regions.

Text is compared in its normalized form (:func:`kbsync.core.normalize.normalize`, the
one normalization every gate uses), so re-wrapping, indentation or line endings
never count as changes. The canonical texts are cut by the byte-level CDC
(:mod:`kbsync.core.chunking.bytecdc`) with sizes that scale with the document
(:func:`~kbsync.core.chunking.bytecdc.params_for_length`), the two chunk sequences
are aligned, and every run of chunks that differs is refined with a word-level
diff, so a region is a run of whole words that really changed. Regions are then
mapped back to offsets in the texts as given, for display. The runs of words that
changed make the edit's kind and reason (:mod:`kbsync.core.edits`), and the kind its verdict.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher

import numpy as np
import numpy.typing as npt

from kbsync.core.chunking.bytecdc import byte_chunks, iter_byte_chunks, params_for_length
from kbsync.core.chunking.params import ByteParams
from kbsync.core.edits import Classification, Hunk, changed_fields, classify, fold
from kbsync.core.normalize import canonical_pieces, canonical_text, canonical_words, scan_words
from kbsync.model import ByteChunk, ChangeKind, ChangeReport, FieldChange, Region, Verdict

__all__ = ["REEXAMINE_KEPT", "REEXAMINE_SIMILARITY", "WORD_DIFF_LIMIT", "WORD_REGIONS_LIMIT",
           "compare", "compare_long", "with_metadata"]

REEXAMINE_SIMILARITY = 0.1
"""Similarity at or below which a new text that kept less than half of the old one is held
(``docs/change-reports.md``): each final page of the shared histories replaced by an error
page, a login wall, a bot check or a cookie wall scored at most 0.084 (0.05 let 91 of
5,640 through); their two full rewrites scored 0.031 and 0.056, and are held once."""
REEXAMINE_KEPT = 0.5
"""A new text that keeps this share of the old one (or more) grew or was rewritten in part:
it is never re-examined as a collapse, however low its similarity (a stub that became a
page twenty times its size has a similarity near 0)."""
WORD_DIFF_LIMIT = 20_000
"""Words (old and new together) above which a changed run is not refined word by word.

difflib's matcher is quadratic in the worst case; a run this large is a rewrite
of that part, so it is reported whole (still cut at word boundaries).
"""

WORD_REGIONS_LIMIT = 4_000_000
"""Characters of the longer version above which a text gets no word-exact regions.

Word-exact regions need each word's offsets in both versions (about 18 bytes of
arrays per character while one version is scanned); a text this long is compared
by its byte-CDC chunks alone, over its canonical text made a block at a time:
similarity is the share of bytes in chunks both versions hold, and ``regions``
and ``removed_regions`` are empty, so the memory stays a small multiple of the text.
"""

IntArray = npt.NDArray[np.int64]


def compare(
    old: str | bytes, new: str | bytes, params: ByteParams | None = None,
    *, ignore: Collection[str] = (),
) -> ChangeReport:
    """What changed from ``old`` to ``new``.

    For text, ``similarity`` is the share of the document that is unchanged:
    ``1 - (removed + added) / (|old| + |new|)`` in UTF-8 bytes of the normalized
    texts, where ``removed`` and ``added`` are the bytes of the changed word runs
    (``removed_regions`` and ``regions``). The runs are found by aligning the
    byte-CDC chunks of both versions (sizes from ``params``, by default chosen
    from the longer version's length so that short documents still get at least
    16 chunks) and diffing word by word inside each run of chunks that differ.
    For bytes, it is the share of bytes in chunks both versions hold,
    ``(shared_old + shared_new) / (|old| + |new|)``.

    For text, ``regions`` are the runs of whole words of ``new`` that are not in
    ``old`` and ``removed_regions`` those of ``old`` not in ``new``, as character
    offsets into the texts as given (before normalization); for bytes, the runs
    of changed chunks, in bytes. ``moved`` counts kept chunks that left the
    longest run of kept chunks in their old order. Passages in ``ignore``
    (boilerplate, in normalized form) are removed from both normalized texts
    before the similarity, the kind and the verdict are computed; regions still cover them.
    Texts longer than :data:`WORD_REGIONS_LIMIT` are compared by :func:`compare_long`,
    with neither regions nor ``ignore``.

    ``kind`` and ``reason`` say what the edit is (:func:`kbsync.core.edits.classify`): a
    cosmetic edit (whitespace, punctuation, case, a few spelling fixes) has the
    ``cosmetic`` verdict whatever its similarity; a substantive one is reprocessed, or
    re-examined when it shares almost nothing with the old text (:data:`REEXAMINE_SIMILARITY`).
    Bytes are not compared word by word: a changed byte string is substantive.
    """
    if isinstance(old, str) and isinstance(new, str):
        if max(len(old), len(new)) > WORD_REGIONS_LIMIT:
            return compare_long([old], [new], params)
        a, b = _Side.of(old), _Side.of(new)
        report = _compare_text(a, b, params)
        if ignore and report.changed:
            stripped = _compare_text(_Side.of(_without(a.canonical, ignore)),
                                     _Side.of(_without(b.canonical, ignore)), params)
            if not stripped.changed:
                return replace(report, similarity=1.0, kind=ChangeKind.COSMETIC,
                               reason="boilerplate only", verdict=Verdict.COSMETIC)
            report = replace(report, similarity=stripped.similarity, kind=stripped.kind,
                             reason=stripped.reason, verdict=stripped.verdict)
        return report
    old_bytes = old.encode("utf-8") if isinstance(old, str) else old
    new_bytes = new.encode("utf-8") if isinstance(new, str) else new
    return _compare_bytes(old_bytes, new_bytes, params)


def compare_long(old: Iterable[str], new: Iterable[str],
                 params: ByteParams | None = None) -> ChangeReport:
    """The change report of two very long texts given in pieces, from their byte-CDC chunks.

    What :func:`compare` gives texts over :data:`WORD_REGIONS_LIMIT`: a similarity
    of chunks both versions hold, no regions. The canonical texts are made and cut
    a block at a time, so neither version need be held whole (a store can hand the
    stored one over as it reads it). Every text this long gets the largest chunk
    sizes (:func:`~kbsync.core.chunking.bytecdc.params_for_length`), whatever its length,
    unless ``params`` are given. Boilerplate is not taken out of such a text: a few
    passages are no share of it.
    """
    p = params or params_for_length(WORD_REGIONS_LIMIT)
    old_chunks, new_chunks = _streamed_chunks(old, p), _streamed_chunks(new, p)
    changed = [c.digest for c in old_chunks] != [c.digest for c in new_chunks]
    total = sum(c.length for c in old_chunks) + sum(c.length for c in new_chunks)
    similarity = _shared_share(old_chunks, new_chunks, total) if changed else 1.0
    return _report(old_chunks, new_chunks, changed, similarity, (), (),
                   _kept_share(old_chunks, new_chunks),
                   _unread(f"over {WORD_REGIONS_LIMIT:,} characters"))


def with_metadata(report: ChangeReport | None, old: Mapping[str, str],
                  new: Mapping[str, str]) -> ChangeReport | None:
    """``report`` (None: the text did not change) with the document's metadata compared too.

    A changed metadata field (front matter, a page's or a file's own fields; not
    :data:`~kbsync.core.edits.STAMP_FIELDS`) makes the edit substantive, named by the reason
    (``metadata field status``), and a report is made for it when the text is the same.
    """
    fields = changed_fields(old, new)
    if not fields:
        return report
    reason = "metadata field" + ("s " if len(fields) > 1 else " ") + ", ".join(fields[:3]) \
        + (f" and {len(fields) - 3} more" if len(fields) > 3 else "")
    values = tuple(FieldChange(name, old.get(name), new.get(name)) for name in fields)
    if report is None:
        return ChangeReport(changed=True, similarity=1.0, added=(), removed=(), kept=0, moved=0,
                            regions=(), verdict=Verdict.REPROCESS,
                            kind=ChangeKind.SUBSTANTIVE, reason=reason, fields=values)
    verdict = Verdict.REPROCESS if report.verdict in (Verdict.UNCHANGED, Verdict.COSMETIC) \
        else report.verdict
    return replace(report, changed=True, kind=ChangeKind.SUBSTANTIVE, reason=reason,
                   verdict=verdict, fields=values)


def _unread(what: str) -> Classification:
    """The classification of a change that is not compared word by word."""
    return Classification(ChangeKind.SUBSTANTIVE, f"{what}: not compared word by word")


def _streamed_chunks(text: Iterable[str], params: ByteParams) -> list[ByteChunk]:
    """The byte-CDC chunks of the canonical form of the text in ``text``'s pieces."""
    return list(iter_byte_chunks((piece.encode("utf-8") for piece in canonical_pieces(text)),
                                 params))


def _without(text: str, passages: Collection[str]) -> str:
    for passage in sorted(passages, key=len, reverse=True):
        text = text.replace(passage, "")
    return text


@dataclass(frozen=True, slots=True)
class _Side:
    """One version: its canonical text, and each word's offsets there and in the input."""

    source: str  # the text as given
    canonical: str
    data: bytes
    starts: IntArray  # canonical character offsets of each word
    ends: IntArray
    byte_starts: IntArray  # the same in the canonical UTF-8 bytes
    byte_ends: IntArray
    input_starts: IntArray  # character offsets in the text as given
    input_ends: IntArray

    @classmethod
    def of(cls, text: str) -> _Side:
        fused = canonical_words(text)
        if fused is not None:  # the same offsets from the compiled kernel, in one pass
            return cls(text, fused.text, fused.data, fused.starts, fused.ends, fused.byte_starts,
                       fused.byte_ends, fused.input_starts, fused.input_ends)
        scan = scan_words(text)
        canonical = canonical_text(scan, 0, len(scan))
        data = canonical.encode("utf-8")
        starts, ends = scan.text_starts, scan.text_ends
        if len(data) == len(canonical):
            byte_starts, byte_ends = starts, ends
        else:
            b = np.frombuffer(data, dtype=np.uint8)
            byte_of = np.append(np.flatnonzero((b & 0xC0) != 0x80), len(b)).astype(np.int64)
            byte_starts, byte_ends = byte_of[starts], byte_of[ends]
        return cls(text, canonical, data, starts, ends, byte_starts, byte_ends,
                   scan.input_starts, scan.input_ends)

    def words(self, i: int, j: int) -> list[str]:
        return [self.canonical[int(s):int(e)]
                for s, e in zip(self.starts[i:j].tolist(), self.ends[i:j].tolist(), strict=True)]

    def word_span(self, a: int, z: int) -> tuple[int, int]:
        """Indices ``[i, j)`` of the words that overlap or touch the byte range ``[a, z)``.

        Touching words count on both sides of a change alike: the bytes around a changed
        run are the same in both versions, but a word that ends where the run starts in
        one version (``address`` before ``.``) runs into it in the other."""
        i = int(np.searchsorted(self.byte_ends, a, side="left"))
        j = int(np.searchsorted(self.byte_starts, z, side="right"))
        return i, max(i, j)

    def byte_size(self, runs: Sequence[tuple[int, int]]) -> int:
        """Canonical UTF-8 bytes of the word runs ``[i, j)``, the spaces inside them included."""
        return sum(int(self.byte_ends[j - 1]) - int(self.byte_starts[i]) for i, j in runs)

    def region(self, i: int, j: int) -> Region:
        """Words ``[i, j)`` as a region of the input text."""
        start = int(self.input_starts[i])
        return Region(start, int(self.input_ends[j - 1]) - start)


def _compare_text(a: _Side, b: _Side, params: ByteParams | None) -> ChangeReport:
    p = params or params_for_length(max(len(a.data), len(b.data)))
    old_chunks, new_chunks = byte_chunks(a.data, p), byte_chunks(b.data, p)
    changed = a.canonical != b.canonical
    hunks = _changed_words(a, b, old_chunks, new_chunks) if changed else []
    removed = _merged([(i1, i2) for i1, i2, _, _ in hunks if i2 > i1])
    added = _merged([(j1, j2) for _, _, j1, j2 in hunks if j2 > j1])
    total = len(a.data) + len(b.data)
    lost = a.byte_size(removed) + b.byte_size(added)
    similarity = 1.0 if not changed or total == 0 else max(0.0, 1.0 - lost / total)
    kept = 1.0 - a.byte_size(removed) / len(a.data) if a.data else 0.0
    edit = classify((_hunk(a, b, *run) for run in hunks), a.source, b.source,
                    (len(a.starts), len(b.starts))) if changed \
        else Classification(ChangeKind.UNCHANGED, "")
    return _report(old_chunks, new_chunks, changed, similarity,
                   tuple(b.region(i, j) for i, j in added),
                   tuple(a.region(i, j) for i, j in removed), kept, edit)


def _hunk(a: _Side, b: _Side, i1: int, i2: int, j1: int, j2: int) -> Hunk:
    """Words ``[i1, i2)`` of ``a`` replaced by words ``[j1, j2)`` of ``b``."""
    return Hunk(a.words(i1, i2), b.words(j1, j2), a.input_starts[i1:i2].tolist(),
                b.input_starts[j1:j2].tolist())


def _changed_words(a: _Side, b: _Side, old_chunks: list[ByteChunk], new_chunks: list[ByteChunk],
                   ) -> list[tuple[int, int, int, int]]:
    """The changed word runs ``(i1, i2, j1, j2)``, in order: words ``[i1, i2)`` of ``a``
    replaced by words ``[j1, j2)`` of ``b`` (either run may be empty).

    Only the runs of chunks that differ are diffed word by word, so the cost
    follows the size of the change, not of the document.
    """
    spans: list[list[int]] = []
    for oa, oz, na, nz in _changed_runs(old_chunks, new_chunks, len(a.data), len(b.data)):
        oi, oj = a.word_span(oa, oz)
        ni, nj = b.word_span(na, nz)
        if spans and (oi < spans[-1][1] or ni < spans[-1][3]):
            # A word that straddles the equal chunks between two runs: diff them as one.
            spans[-1][1], spans[-1][3] = max(oj, spans[-1][1]), max(nj, spans[-1][3])
        else:
            spans.append([oi, oj, ni, nj])
    return [run for oi, oj, ni, nj in spans for run in _word_diff(a, oi, oj, b, ni, nj)]


def _compare_bytes(old: bytes, new: bytes, params: ByteParams | None) -> ChangeReport:
    p = params or params_for_length(max(len(old), len(new)))
    old_chunks, new_chunks = byte_chunks(old, p), byte_chunks(new, p)
    changed = old != new
    similarity = _shared_share(old_chunks, new_chunks, len(old) + len(new)) if changed else 1.0
    old_digests = {c.digest for c in old_chunks}
    new_digests = {c.digest for c in new_chunks}
    return _report(old_chunks, new_chunks, changed, similarity,
                   _merge([c for c in new_chunks if c.digest not in old_digests]),
                   _merge([c for c in old_chunks if c.digest not in new_digests]),
                   _kept_share(old_chunks, new_chunks), _unread("bytes"))


def _shared_share(old: Sequence[ByteChunk], new: Sequence[ByteChunk], total: int) -> float:
    """Bytes of chunks found in both versions (as many times as both hold them), over ``total``."""
    if total == 0:
        return 1.0
    return min(1.0, 2 * _shared_bytes(old, new) / total)


def _kept_share(old: Sequence[ByteChunk], new: Sequence[ByteChunk]) -> float:
    """The share of the bytes of ``old`` in chunks ``new`` holds too."""
    size = sum(c.length for c in old)
    return _shared_bytes(old, new) / size if size else 0.0


def _shared_bytes(old: Sequence[ByteChunk], new: Sequence[ByteChunk]) -> int:
    """Bytes of one version in chunks the other holds too, as many times as both hold them."""
    left = Counter(c.digest for c in old)
    right = Counter(c.digest for c in new)
    length = {c.digest: c.length for c in (*old, *new)}
    return sum(min(n, right[d]) * length[d] for d, n in left.items() if d in right)


def _report(old: list[ByteChunk], new: list[ByteChunk], changed: bool, similarity: float,
            regions: tuple[Region, ...], removed_regions: tuple[Region, ...],
            kept_share: float, edit: Classification) -> ChangeReport:
    """The report of a comparison; ``kept_share`` is the share of the old version the new
    one keeps (see :data:`REEXAMINE_KEPT`), ``edit`` what the edit is."""
    if not changed:
        edit = Classification(ChangeKind.UNCHANGED, "")
    old_digests = {c.digest for c in old}
    new_digests = {c.digest for c in new}
    added = tuple(c for c in new if c.digest not in old_digests)
    kept = len(new) - len(added)
    return ChangeReport(
        changed=changed,
        similarity=similarity,
        added=added,
        removed=tuple(c for c in old if c.digest not in new_digests),
        kept=kept,
        moved=kept - _ordered(old, new),
        regions=regions,
        verdict=_verdict(changed, edit.kind, similarity, kept_share),
        removed_regions=removed_regions,
        kind=edit.kind,
        reason=edit.reason,
    )


def _changed_runs(old: list[ByteChunk], new: list[ByteChunk], old_size: int,
                  new_size: int) -> list[tuple[int, int, int, int]]:
    """Byte ranges ``(old_start, old_end, new_start, new_end)`` of the runs of chunks that differ.

    The two chunk sequences are aligned by their digests; a moved chunk that
    leaves the alignment shows as removed at its old place and added at its new one.
    """
    matcher = SequenceMatcher(None, [c.digest for c in old], [c.digest for c in new],
                              autojunk=False)
    old_at = [c.offset for c in old] + [old_size]
    new_at = [c.offset for c in new] + [new_size]
    return [(old_at[i1], old_at[i2], new_at[j1], new_at[j2])
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _word_diff(a: _Side, oi: int, oj: int, b: _Side, ni: int,
               nj: int) -> list[tuple[int, int, int, int]]:
    """The changed word runs ``(i1, i2, j1, j2)`` within two aligned ranges."""
    if oj - oi + nj - ni > WORD_DIFF_LIMIT:
        return [(oi, oj, ni, nj)]
    old, new = a.words(oi, oj), b.words(ni, nj)
    # Aligned as folded words (``fold``: no case, no marks), so that a word whose case or
    # punctuation changed is paired with itself, not taken for a removal and an addition.
    matcher = SequenceMatcher(None, [fold(w) or w for w in old], [fold(w) or w for w in new],
                              autojunk=False)
    runs: list[tuple[int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            runs.append((oi + i1, oi + i2, ni + j1, ni + j2))
            continue
        for k in range(i2 - i1):
            if old[i1 + k] != new[j1 + k]:
                i, j = oi + i1 + k, ni + j1 + k
                if runs and runs[-1][1] == i and runs[-1][3] == j:
                    runs[-1] = (runs[-1][0], i + 1, runs[-1][2], j + 1)
                else:
                    runs.append((i, i + 1, j, j + 1))
    return runs


def _merged(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Word runs sorted, with overlapping or touching runs joined."""
    out: list[tuple[int, int]] = []
    for i, j in sorted(runs):
        if out and i <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], j))
        else:
            out.append((i, j))
    return out


def _verdict(changed: bool, kind: ChangeKind, similarity: float, kept_share: float) -> Verdict:
    if not changed:
        return Verdict.UNCHANGED
    if kind is ChangeKind.COSMETIC:
        return Verdict.COSMETIC
    if similarity <= REEXAMINE_SIMILARITY and kept_share < REEXAMINE_KEPT:
        return Verdict.REEXAMINE_EXTRACTION
    return Verdict.REPROCESS


def _merge(chunks: Sequence[ByteChunk]) -> tuple[Region, ...]:
    regions: list[Region] = []
    for c in chunks:
        if regions and regions[-1].end == c.offset:
            regions[-1] = Region(regions[-1].offset, regions[-1].length + c.length)
        else:
            regions.append(Region(c.offset, c.length))
    return tuple(regions)


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
