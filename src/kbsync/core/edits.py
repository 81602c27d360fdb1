"""What an edit is: cosmetic or substantive, and the first change that decides it.

Similarity says how much of a document changed, not what: in a long page a changed
version number, an added "not" or a removed paragraph is a small share of the bytes.
So an edit is classified by the words that changed. Cosmetic: whitespace, punctuation,
case, re-wrapping, and at most :data:`FEW_WORDS` spelling fixes (a word replaced by one
at edit distance 1). Anything else is substantive, and so is, whatever its size, a
changed number, date or version, negation or modal word, metadata field, heading or
code identifier (a spelling-size change there too).

Only the changed runs of words are read (:class:`Hunk`, from :func:`kbsync.core.compare`),
each aligned word by word when it holds at most :data:`HUNK_WORDS` words (longer runs
are counted, not aligned), plus the lines around them (at most :data:`LINE_REACH`
characters either side) and one scan of each text for code fences: the cost follows
the size of the change, not of the document.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from kbsync.model import ChangeKind

__all__ = [
    "FEW_WORDS",
    "HUNK_WORDS",
    "LINE_REACH",
    "STAMP_FIELDS",
    "Classification",
    "Hunk",
    "changed_fields",
    "classify",
    "fold",
]

FEW_WORDS = 3
"""Spelling fixes a cosmetic edit may hold; a fourth makes it substantive."""
HUNK_WORDS = 500
"""Words (both sides) above which a changed run is counted rather than aligned word by
word: aligning costs up to the product of its sides, so at most 125 comparisons per word."""
LINE_REACH = 200
"""Characters either side of a changed word searched for its line's ends; a longer line is
no heading or metadata field."""
STAMP_FIELDS = frozenset({"modified", "git_commit", "git_author_date"})
"""Metadata fields that say when a version was saved or listed, not what the document says
(a file's modification date, the git source's commit): they change with every edit, so
their change never makes an edit substantive."""
_SMALL_RUN = 6
"""Words on each side of a change up to which its numbers, negations, modal words and
identifiers name the reason; a longer run is reported by its size."""
_SHOWN = 40

_NEGATIONS = frozenset({
    "not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "cannot",
    "without", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "cant", "couldnt",
    "wont", "wouldnt", "shouldnt", "mustnt", "hasnt", "havent", "hadnt", "neednt", "shant",
})
_MODALS = {
    "must": "must", "mustnt": "must", "should": "should", "shouldnt": "should",
    "shall": "shall", "shant": "shall", "may": "may", "might": "might", "can": "can",
    "cannot": "can", "cant": "can", "could": "could", "couldnt": "could", "will": "will",
    "wont": "will", "would": "would", "wouldnt": "would", "need": "need", "needs": "need",
    "neednt": "need", "required": "required", "optional": "optional",
    "recommended": "recommended", "deprecated": "deprecated", "obsolete": "obsolete",
    "always": "always",
}
_MONTHS = frozenset({
    "january", "february", "march", "april", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept",
    "oct", "nov", "dec",
})
_NUMBER_WORDS = frozenset({
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    "hundred", "thousand", "million", "billion", "once", "twice",
})
_MEANING = _NEGATIONS | _MODALS.keys() | _MONTHS | _NUMBER_WORDS
"""Words whose change is never a spelling fix, however close (``not`` → ``now``)."""
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_VERSION = re.compile(r"\d+(?:\.\d+){2,}")
_IDENTIFIER = re.compile(r"[^\W\d]\w*")
# A token that reads as code or an address: backticks, snake_case, a call, a dotted or
# scoped name, a link or URL, an assignment, camelCase.
_CODE = re.compile(r"`|\w_\w|\w\(\S*\)|::|://|\]\(|\w\.[^\W\d]\w|[a-z][A-Z]|\w=|->")
_FENCE = re.compile(r"^[ \t]{0,3}(?:`{3,}|~{3,})", re.MULTILINE)
_ATX = re.compile(r"[ \t]{0,3}(#{1,6})[ \t]+(.*?)[ \t#]*")
_RULE = re.compile(r"[ \t]*([=\-~^\"'`:._*+#])\1{2,}[ \t]*")
_FIELD = re.compile(r"(?::([\w .-]{1,40}):|([^\W\d][\w-]{0,30}(?: [\w-]+){0,2}):)(?:[ \t]|$)")
_NOT_HEADING_START = tuple("-*+>|{<![/.\\`~=0123456789@$%&(")


@dataclass(frozen=True, slots=True)
class Hunk:
    """One run of change: the words of the old text replaced by those of the new one.

    ``old_at`` and ``new_at`` are each word's character offset in the text as given (for
    the line around it); a pure insertion has no old words, a pure deletion no new ones.
    """

    old: Sequence[str]
    new: Sequence[str]
    old_at: Sequence[int]
    new_at: Sequence[int]


@dataclass(frozen=True, slots=True)
class Classification:
    """An edit's kind, and its reason: the first decisive change (``number 950 → 975``) for
    a substantive edit, what changed (``punctuation, case``) for a cosmetic one."""

    kind: ChangeKind
    reason: str


def classify(hunks: Iterable[Hunk], old_text: str, new_text: str,
             sizes: tuple[int, int] = (0, 0)) -> Classification:
    """Classify the edit made of ``hunks`` (in document order) between two texts.

    The reason of a substantive edit is the first change, in document order, of a
    metadata field, heading, number, date or version, negation, modal word or code
    identifier; failing one, the size of the change (``12 words changed``,
    ``word "quick" → "fast"``). An edit that takes out at least half of the old text's
    words (``sizes``: both texts' word counts) is named by its size, and is a rewrite
    when at least half of the new text is new too (``rewrite: 812 words changed``). The
    texts give the lines around the changed words.
    """
    scan = _Scan(_Layout(old_text), _Layout(new_text))
    for hunk in hunks:
        scan.hunk(hunk)
    return scan.result(sizes)


def changed_fields(old: Mapping[str, str], new: Mapping[str, str]) -> tuple[str, ...]:
    """The names of the metadata fields that differ, sorted, except :data:`STAMP_FIELDS`."""
    return tuple(sorted(name for name in set(old) | set(new)
                        if name not in STAMP_FIELDS and old.get(name) != new.get(name)))


def fold(word: str) -> str:
    """A word's letters and digits, case-folded: what whitespace, punctuation and case leave."""
    return "".join(c for c in word.casefold() if c.isalnum())


def _code(word: str) -> bool:
    return _CODE.search(word) is not None


def _parts(words: Iterable[str]) -> list[str]:
    """The identifier parts of words, case-folded (case is cosmetic): ``foo_bar`` is one,
    ``foo.bar`` two."""
    return [m.group().casefold() for w in words for m in _IDENTIFIER.finditer(w)]


def _numbers(words: Iterable[str]) -> list[str]:
    found = [m.group() for w in words for m in _NUMBER.finditer(w)]
    return found + [f for w in words if (f := fold(w)) in _NUMBER_WORDS]


def _same_sense(a: str, b: str) -> bool:
    """Two spellings of one negated or plain modal word (``can't`` and ``cannot``)."""
    return bool(_modal(a)) and _modal(a) == _modal(b) and _negation(a) == _negation(b)


def _one_edit(a: str, b: str) -> bool:
    """Whether two words are one insertion, deletion, substitution or swap of neighbours
    apart (optimal string alignment distance 1)."""
    if len(a) == len(b):
        diffs = [k for k in range(len(a)) if a[k] != b[k]]
        return len(diffs) == 1 or (len(diffs) == 2 and diffs[1] == diffs[0] + 1
                                   and a[diffs[0]] == b[diffs[1]] and a[diffs[1]] == b[diffs[0]])
    if abs(len(a) - len(b)) != 1:
        return False
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    i = 0
    while i < len(shorter) and longer[i] == shorter[i]:
        i += 1
    return longer[i + 1:] == shorter[i:]


def _show(word: str) -> str:
    word = word.strip(".,;:!?\"'()[]*")
    return word if len(word) <= _SHOWN else word[:_SHOWN - 1] + "…"


def _quoted(words: Sequence[str]) -> str:
    return '"' + _show(" ".join(words)) + '"'


class _Layout:
    """A text as given, read around changed words: its lines, headings, fields, code."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._fences: list[int] | None = None
        self._header: tuple[int, list[tuple[int, str]]] | None = None

    def line(self, at: int) -> tuple[int, int] | None:
        """``[start, end)`` of the line holding offset ``at``; None past :data:`LINE_REACH`."""
        text = self.text
        start = text.rfind("\n", max(0, at - LINE_REACH), at) + 1
        if start == 0 and at > LINE_REACH:
            return None
        end = text.find("\n", at, at + LINE_REACH)
        if end < 0:
            if len(text) - at > LINE_REACH:
                return None
            end = len(text)
        return start, end

    def in_code(self, at: int) -> bool:
        """Whether offset ``at`` is inside a fenced code block or an indented literal block
        (after a line ending in ``::`` or a ``.. code-block::`` directive)."""
        if self._fences is None:
            self._fences = [m.start() for m in _FENCE.finditer(self.text)]
        if bisect_right(self._fences, at) % 2:
            return True
        span = self.line(at)
        if span is None:
            return False
        line = self.text[span[0]:span[1]]
        indent = len(line) - len(line.lstrip())
        if not indent or not line.strip():
            return False
        end = span[0] - 1
        for _ in range(100):  # up to the line that introduces the indented block
            if end <= 0:
                return False
            floor = max(0, end - LINE_REACH)
            start = self.text.rfind("\n", floor, end) + 1
            if start == 0 and floor > 0:
                return False
            above = self.text[start:end]
            if above.strip() and len(above) - len(above.lstrip()) < indent:
                above = above.strip()
                if above.startswith(".."):  # a directive: only a code one holds code
                    return above.startswith((".. code", ".. sourcecode"))
                return above.endswith("::")
            end = start - 1
        return False

    def heading(self, at: int) -> str | None:
        """The heading on the line at ``at``, if it is one: Markdown ``#`` or underlined
        (Markdown setext, reStructuredText), or a short line alone in its paragraph
        without closing punctuation (how an extracted record sets its headings)."""
        span = self.line(at)
        if span is None or self.in_code(at):
            return None
        start, end = span
        raw = self.text[start:end].rstrip()
        line = raw.strip()
        atx = _ATX.fullmatch(raw)
        if atx:
            return atx.group(2)
        below = self._next_line(end)
        if line and below is not None and _RULE.fullmatch(below.rstrip()) and fold(line):
            return line
        above = self._previous_line(start)
        alone = (above is None or not above.strip()) and (below is None or not below.strip())
        if (alone and 0 < len(line.split()) <= 12 and fold(line)
                and not line.startswith(_NOT_HEADING_START) and line[-1] not in ".,;:"
                and not _FIELD.match(line)):
            return line
        return None

    def field(self, at: int) -> str | None:
        """The metadata field on the line at ``at``: in a leading ``---`` front matter
        block, or in a leading header of ``Name: value`` lines (two or more)."""
        start, fields = self._leading_fields()
        if at >= start or not fields:
            return None
        k = bisect_right([offset for offset, _ in fields], at) - 1
        return fields[k][1] if k >= 0 else None

    def _leading_fields(self) -> tuple[int, list[tuple[int, str]]]:
        """Where the leading metadata block ends, and the offset and name of each field."""
        if self._header is None:
            self._header = _leading_fields(self.text[:10_000].split("\n"))
        return self._header

    def _next_line(self, end: int) -> str | None:
        if end >= len(self.text):
            return None
        stop = self.text.find("\n", end + 1, end + 1 + LINE_REACH)
        return self.text[end + 1:stop if stop >= 0 else end + 1 + LINE_REACH]

    def _previous_line(self, start: int) -> str | None:
        if start == 0:
            return None
        floor = max(0, start - 1 - LINE_REACH)
        return self.text[max(floor, self.text.rfind("\n", floor, start - 1) + 1):start - 1]


def _leading_fields(lines: Sequence[str]) -> tuple[int, list[tuple[int, str]]]:
    """A ``---`` front matter block up to its closing line, else a first paragraph made of
    two or more ``Name: value`` lines (and indented continuations); else nothing."""
    fields: list[tuple[int, str]] = []
    front = bool(lines) and lines[0].rstrip() == "---"
    offset = len(lines[0]) + 1 if front else 0
    for line in lines[1:] if front else lines:
        if front and line.rstrip() in ("---", "..."):
            return offset, fields
        if not front and not line.strip():
            break
        found = None if line[:1].isspace() else _FIELD.match(line)
        if found:
            fields.append((offset, (found.group(1) or found.group(2)).strip()))
        elif not front and not line[:1].isspace():
            return 0, []  # a header holds fields and their continuations only
        offset += len(line) + 1
    return (offset, fields) if not front and len(fields) >= 2 else (0, [])


@dataclass
class _Scan:
    """What the hunks of one edit hold so far."""

    old: _Layout
    new: _Layout
    specific: str = ""  # the first decisive change, by name
    added: int = 0
    removed: int = 0
    replaced: int = 0
    old_words: int = 0  # words of the old text replaced or removed (spelling fixes aside)
    new_words: int = 0  # words of the new text that replace them or were added
    first_words: tuple[Sequence[str], Sequence[str]] | None = None
    spelling: list[tuple[str, str]] = field(default_factory=list)
    cosmetic: set[str] = field(default_factory=set)

    def result(self, sizes: tuple[int, int] = (0, 0)) -> Classification:
        words = self.added + self.removed + self.replaced
        if self.specific or words or len(self.spelling) > FEW_WORDS:
            spelled = len(self.spelling)
            if sizes[0] and 2 * (self.old_words + spelled) >= sizes[0]:  # most of it gone
                rewrite = sizes[1] and 2 * (self.new_words + spelled) >= sizes[1]
                return Classification(ChangeKind.SUBSTANTIVE,
                                      ("rewrite: " if rewrite else "") + self._size(words))
            return Classification(ChangeKind.SUBSTANTIVE, self.specific or self._size(words))
        parts = []
        if self.spelling:
            (a, b), more = self.spelling[0], len(self.spelling) - 1
            parts.append(f'spelling "{_show(a)}" → "{_show(b)}"'
                         + (f" and {more} more" if more else ""))
        parts += [name for name in ("whitespace", "punctuation", "case") if name in self.cosmetic]
        return Classification(ChangeKind.COSMETIC, ", ".join(parts) or "whitespace")

    def _size(self, words: int) -> str:
        words += len(self.spelling)
        if words == 1 and self.first_words is not None:
            old, new = self.first_words
            if old and new:
                return f"word {_quoted(old)} → {_quoted(new)}"
            return f"word {_quoted(old or new)} {'removed' if old else 'added'}"
        noun = "word" if words == 1 else "words"
        if words == self.added:
            return f"{words} {noun} added"
        if words == self.removed:
            return f"{words} {noun} removed"
        return f"{words} {noun} changed"

    def hunk(self, hunk: Hunk) -> None:
        old = [(i, k) for i, w in enumerate(hunk.old) if (k := fold(w))]
        new = [(j, k) for j, w in enumerate(hunk.new) if (k := fold(w))]
        if len(old) + len(new) < len(hunk.old) + len(hunk.new):
            self.cosmetic.add("punctuation")  # marks and symbols alone: rules, bullets
        if len(old) + len(new) > HUNK_WORDS:
            if "".join(k for _, k in old) == "".join(k for _, k in new):
                self._same_words(hunk, 0, len(hunk.old), 0, len(hunk.new))
            else:
                self._words(hunk, [i for i, _ in old], [j for j, _ in new], small=False)
            return
        matcher = SequenceMatcher(None, [k for _, k in old], [k for _, k in new], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            a, b = [i for i, _ in old[i1:i2]], [j for j, _ in new[j1:j2]]
            if tag == "equal":
                for i, j in zip(a, b, strict=True):
                    self._same_words(hunk, i, i + 1, j, j + 1)
            elif tag == "replace" and "".join(k for _, k in old[i1:i2]) == \
                    "".join(k for _, k in new[j1:j2]):
                self.cosmetic.add("whitespace")  # words joined or split
                self._same_words(hunk, a[0], a[-1] + 1, b[0], b[-1] + 1)
            elif tag == "replace" and self._spelling(hunk, a, b):
                pass
            else:
                self._words(hunk, a, b, small=len(a) <= _SMALL_RUN and len(b) <= _SMALL_RUN)

    def _same_words(self, hunk: Hunk, i1: int, i2: int, j1: int, j2: int) -> None:
        """Words equal but for case and punctuation: cosmetic, unless a number or an
        identifier changed (``1,000`` → ``1000``, ``foo_bar`` → ``foo.bar``)."""
        a, b = hunk.old[i1:i2], hunk.new[j1:j2]
        if list(a) == list(b):
            return
        if self._decisive(hunk, a, b, i1, j1, same_letters=True):
            return
        field_name = self.old.field(hunk.old_at[i1]) or self.new.field(hunk.new_at[j1])
        if field_name:  # a field's value is data: any change of it counts
            self.specific = self.specific or f"metadata field {field_name}"
        else:
            joined_a, joined_b = "".join(a), "".join(b)
            if [c for c in joined_a if c.isalnum()] != [c for c in joined_b if c.isalnum()]:
                self.cosmetic.add("case")
            if [c for c in joined_a if not c.isalnum()] != [c for c in joined_b
                                                             if not c.isalnum()]:
                self.cosmetic.add("punctuation")

    def _spelling(self, hunk: Hunk, a: list[int], b: list[int]) -> bool:
        """Record a replacement made only of spelling fixes (each word at edit distance 1,
        none of them code, a number, a negation, a modal word or a month)."""
        if len(a) != len(b):
            return False
        pairs = [(hunk.old[i], hunk.new[j]) for i, j in zip(a, b, strict=True)]
        for (x, y), i, j in zip(pairs, a, b, strict=True):
            fx, fy = fold(x), fold(y)
            if (_code(x) or _code(y) or len(fx) > 64 or not (fx.isalpha() and fy.isalpha())
                    or not (_same_sense(fx, fy) or (_one_edit(fx, fy) and not {fx, fy} & _MEANING))
                    or self.old.in_code(hunk.old_at[i]) or self.new.in_code(hunk.new_at[j])):
                return False
        if not self.specific:
            self.specific = self._context(hunk, a[:1], b[:1])
        self.spelling += pairs
        return True

    def _words(self, hunk: Hunk, a: list[int], b: list[int], *, small: bool) -> None:
        """Record words added, removed or replaced, and what they name when few."""
        if a and b:
            self.replaced += max(len(a), len(b))
        else:
            self.added += len(b)
            self.removed += len(a)
        self.old_words += len(a)
        self.new_words += len(b)
        old = [hunk.old[i] for i in a]
        new = [hunk.new[j] for j in b]
        if self.first_words is None:
            self.first_words = (old, new)
        if not self.specific:
            self.specific = self._context(hunk, a[:1], b[:1])
        if not self.specific and small:
            code = any(self.old.in_code(hunk.old_at[i]) for i in a[:1]) or \
                any(self.new.in_code(hunk.new_at[j]) for j in b[:1])
            self._decisive(hunk, old, new, None, None, code=code)

    def _decisive(self, hunk: Hunk, old: Sequence[str], new: Sequence[str],
                  i: int | None, j: int | None, *, code: bool = False,
                  same_letters: bool = False) -> str:
        """Name what makes this change substantive whatever its size (and record it), or
        return "" when nothing does. ``i`` and ``j`` locate cosmetic-looking words whose
        context (a heading, a field) is checked too; ``code``: the words are in code."""
        reason = _named(old, new, code=code, same_letters=same_letters)
        if reason and i is not None and j is not None:
            reason = self._context(hunk, [i], [j]) or reason
        if reason and not self.specific:
            self.specific = reason
        return reason

    def _context(self, hunk: Hunk, a: Sequence[int], b: Sequence[int]) -> str:
        """A metadata field or heading that the changed words lie in, named."""
        old_at = [hunk.old_at[i] for i in a]
        new_at = [hunk.new_at[j] for j in b]
        for layout, offsets in ((self.old, old_at), (self.new, new_at)):
            for at in offsets:
                name = layout.field(at)
                if name:
                    return f"metadata field {name}"
        before = next((h for at in old_at if (h := self.old.heading(at))), None)
        after = next((h for at in new_at if (h := self.new.heading(at))), None)
        if before and after:
            return f"heading {_quoted([before])} → {_quoted([after])}" if before != after \
                else f"heading {_quoted([after])}"
        if before or after:
            return f"heading {_quoted([before or after or ''])} {'added' if after else 'removed'}"
        return ""


def _named(old: Sequence[str], new: Sequence[str], *, code: bool = False,
           same_letters: bool = False) -> str:
    """The number, date, version, negation, modal word or identifier that differs
    between two runs of words (every word an identifier with ``code``), named; "" when
    none does. Runs with ``same_letters`` (``must read``, ``must-read``) can differ in
    their numbers and identifiers only."""
    numbers_a, numbers_b = _numbers(old), _numbers(new)
    if numbers_a != numbers_b:
        return _first_difference(numbers_a, numbers_b)
    for name, key in () if same_letters else (("date", _month), ("negation", _negation),
                                               ("modal", _modal)):
        removed, added = _lexicon_change(old, new, key)
        if removed or added:
            if name == "date":
                return f"date {_change(removed, added)}"
            return f"{name}: {_change(removed, added)}" if not (removed and added) \
                else f"{name} {_change(removed, added)}"
    if code and [fold(w) for w in old] != [fold(w) for w in new]:
        return f"identifier {_change(old, new)}"
    if _parts(old) != _parts(new) and any(map(_code, (*old, *new))):
        code_a = [w for w in old if _code(w)] or list(old)
        code_b = [w for w in new if _code(w)] or list(new)
        return f"identifier {_change(code_a, code_b)}"
    return ""


def _month(word: str) -> str:
    return word if word in _MONTHS else ""


def _negation(word: str) -> str:
    return "not" if word in _NEGATIONS else ""


def _modal(word: str) -> str:
    return _MODALS.get(word, "")


def _lexicon_change(old: Sequence[str], new: Sequence[str],
                    key: Callable[[str], str]) -> tuple[list[str], list[str]]:
    """The words of ``old`` and ``new`` whose key (a negation, a modal word, a month) one
    side holds more often than the other: ``can't`` and ``cannot`` share theirs."""
    keys_a = [(w, key(fold(w))) for w in old]
    keys_b = [(w, key(fold(w))) for w in new]
    count_a = Counter(k for _, k in keys_a if k)
    count_b = Counter(k for _, k in keys_b if k)
    removed = [w for w, k in keys_a if k and count_a[k] > count_b[k]]
    added = [w for w, k in keys_b if k and count_b[k] > count_a[k]]
    return removed, added


def _change(removed: Sequence[str], added: Sequence[str]) -> str:
    """``"a" → "b"``, ``added "b"`` or ``removed "a"``: the first word of each side."""
    if removed and added:
        return f"{_quoted(removed[:1])} → {_quoted(added[:1])}"
    if added:
        return f"added {_quoted(added[:1])}"
    return f"removed {_quoted(removed[:1])}"


def _number_kind(value: str) -> str:
    if _DATE.fullmatch(value):
        return "date"
    if _VERSION.fullmatch(value):
        return "version"
    return "number"


def _first_difference(a: list[str], b: list[str]) -> str:
    """The first difference of two lists of numbers: ``number 950 → 975``,
    ``version 6.0.1 added``, ``date 2026-01-05 removed``."""
    for tag, i1, _, j1, _ in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "replace":
            return f"{_number_kind(b[j1])} {a[i1]} → {b[j1]}"
        if tag == "insert":
            return f"{_number_kind(b[j1])} {b[j1]} added"
        if tag == "delete":
            return f"{_number_kind(a[i1])} {a[i1]} removed"
    return "number changed"
