"""The word-diff oracle that edit kinds are measured against (independent of ``compare``).

The extracted texts are diffed line by line (difflib, ``autojunk=False``), then each
run of changed lines word by word (words split at whitespace). From the changed word
runs:

- ``words``: words changed, with whitespace, punctuation and case ignored: the runs
  are compared as folded words (letters and digits, lower case; a word of marks alone
  is dropped), a replacement counts its longer side, and one whose folded words join
  to the same string (``web site`` and ``website``) counts nothing;
- ``number``: some changed run of lines holds other digit runs in the old text than
  in the new one (``950`` → ``975``, a version or date added or removed);
- ``layout_only``: the two texts hold the same letters and digits in the same order,
  ignoring case: only whitespace, punctuation or case changed;
- ``raw_words``: words changed as written (how the sample's second stratum was drawn).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher

__all__ = ["OracleEdit", "fold", "oracle_edit", "word_runs"]

_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class OracleEdit:
    """What the oracle sees in one edit."""

    words: int
    number: bool
    layout_only: bool
    raw_words: int


def fold(word: str) -> str:
    """A word's letters and digits in lower case."""
    return "".join(c for c in word.lower() if c.isalnum())


def word_runs(old: str, new: str) -> list[tuple[list[str], list[str]]]:
    """The changed runs of lines, as (old words, new words)."""
    a, b = old.splitlines(), new.splitlines()
    runs = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            runs.append((" ".join(a[i1:i2]).split(), " ".join(b[j1:j2]).split()))
    return runs


def oracle_edit(old: str, new: str) -> OracleEdit:
    """The oracle's reading of the edit from ``old`` to ``new`` (extracted texts)."""
    words = raw = 0
    number = False
    for a, b in word_runs(old, new):
        if Counter(_DIGITS.findall(" ".join(a))) != Counter(_DIGITS.findall(" ".join(b))):
            number = True
        raw += _changed(a, b, lambda x, y: 0 if x == y else max(len(x), len(y)))
        fa, fb = [f for w in a if (f := fold(w))], [f for w in b if (f := fold(w))]
        words += _changed(fa, fb, lambda x, y: 0 if "".join(x) == "".join(y)
                          else max(len(x), len(y)))
    layout_only = "".join(fold(w) for w in old.split()) == "".join(fold(w) for w in new.split())
    return OracleEdit(words, number, layout_only, raw)


def _changed(a: list[str], b: list[str], size: Callable[[list[str], list[str]], int]) -> int:
    """Words in the non-equal opcodes of a word diff, as ``size(old run, new run)``."""
    total = 0
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            total += size(a[i1:i2], b[j1:j2])
    return total
