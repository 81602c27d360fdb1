"""The line-diff oracle that change reports are measured against.

``oracle_similarity(old, new) = 2K / (|old| + |new|)``, sizes in UTF-8 bytes of
the normalized texts (:func:`kbsync.core.normalize.normalize`) and ``K`` the bytes of
the lines equal in both versions (difflib ``SequenceMatcher`` over lines,
``autojunk=False``, its ``equal`` opcodes).

Lines: the normalizer joins the lines of a paragraph with single spaces and
keeps only paragraph marks, so lines are taken from the text as given. A line
is the run of normalized words that begin between two line breaks (``\\n``,
``\\r\\n``, ``\\r``, ``\\x0b``, U+0085, U+2028 and the paragraph separators, as the
normalizer counts them); blank lines hold no word and vanish. Two lines are
equal when their normalized words are. A line's size is the bytes of its words
in the normalized text plus the separator that follows it there, so the lines
of a text add up to exactly its normalized size and identical texts score 1.
Unlike :func:`kbsync.core.compare`, the oracle sees a re-wrapped paragraph as changed
(its lines differ), as a line diff does.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

import numpy as np

from kbsync.core.normalize import canonical_text, scan_words

__all__ = ["oracle_lines", "oracle_similarity"]

_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def oracle_lines(text: str) -> list[tuple[str, int]]:
    """The non-blank lines of ``text``: (normalized words, bytes in the normalized text)."""
    scan = scan_words(text)
    n = len(scan)
    if n == 0:
        return []
    canonical = canonical_text(scan, 0, n)
    breaks = np.array([m.start() for m in _LINE_BREAK.finditer(text)], dtype=np.int64)
    line_of = np.searchsorted(breaks, scan.input_starts, side="right")
    firsts = [*np.flatnonzero(np.diff(line_of, prepend=-1) != 0).tolist(), n]
    starts, ends = scan.text_starts.tolist(), scan.text_ends.tolist()
    out = []
    for k in range(len(firsts) - 1):
        i, j = firsts[k], firsts[k + 1]
        words = canonical[starts[i]:ends[j - 1]]
        upto = starts[j] if j < n else ends[n - 1]  # the following separator included
        out.append((words, len(canonical[starts[i]:upto].encode("utf-8"))))
    return out


def oracle_similarity(old: str, new: str) -> float:
    """``2K / (|old| + |new|)`` over normalized lines (module docstring); 1 for two empty texts."""
    a, b = oracle_lines(old), oracle_lines(new)
    total = sum(size for _, size in a) + sum(size for _, size in b)
    if total == 0:
        return 1.0
    matcher = SequenceMatcher(None, [w for w, _ in a], [w for w, _ in b], autojunk=False)
    kept = sum(size for tag, i1, i2, _, _ in matcher.get_opcodes() if tag == "equal"
               for _, size in a[i1:i2])
    return min(1.0, 2 * kept / total)
