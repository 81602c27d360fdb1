"""reStructuredText section titles in plain text: a `.txt` or `.rst` page split at its titles.

Django's documentation, Python's and most Sphinx projects are reST in `.txt` files.
Their titles are lines underlined (and maybe overlined) with one punctuation character;
as sections they give hits their heading, keep context windows within a section and
weigh title words in full-text search, as Markdown headings do.

Only the adornment rules are read, not the rest of reST: a full parser (docutils)
would stop at every Sphinx role and directive it does not know, and the sections
need no more than where each title is. The rules:

* an underline is a run of one punctuation character at the start of a line, at
  least three long and at least as long as the title above it;
* the title is one unindented line with words, after a blank line, an overline or
  the start of the text; with an overline, the overline and the underline are the
  same run, and the title may be indented;
* a title's level is the order in which its style (the character, with or without
  an overline) first appears in the page, as reST has it;
* a title's text leaves its inline markup out (roles, link targets, backticks);
* the labels just above a title (``.. _custom-managers:``) are its markup too: they
  go with it, so its section starts there and the section before does not end in
  them.

So indented literal blocks, transitions (a run between blank lines) and table
borders are no titles.
"""

from __future__ import annotations

import re

from kbsync.extract.sections import Heading, sections_at, source_lines
from kbsync.model import Section

__all__ = ["rest_sections"]

_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1{2,}")
# Inline markup a title's text leaves out, as a Markdown heading's does: a role's name
# (:setting:`DEBUG`), a link's target (`Django <https://…>`_), quotes and backticks.
_ROLE = re.compile(r":[\w.+-]+(?::[\w.+-]+)*:(?=`)")
_LINK = re.compile(r"`([^`<]*?)\s*<[^`>]*>`_{0,2}")
_QUOTED = re.compile(r"`+([^`]*)`+_{0,2}")
_LABEL = re.compile(r"\.\. _[^:`]+:\s*")


def rest_sections(text: str) -> tuple[Section, ...] | None:
    """The sections of ``text`` at its reST titles, or None when it has no title.

    Text before the first title is a section without a heading (left out when blank);
    each section's text is its source lines without the title and its adornments.
    """
    lines = source_lines(text)
    titles = _titles(lines)
    return sections_at(lines, titles) if titles else None


def _titles(lines: list[str]) -> list[Heading]:
    """(first line, line after the underline, title, level) of each title, in order."""
    found: list[Heading] = []
    styles: list[tuple[str, bool]] = []
    i = 1
    while i < len(lines):
        under = _adornment(lines[i])
        title = lines[i - 1]
        if under is None or not title.strip() or _adornment(title) is not None:
            i += 1
            continue
        over = i >= 2 and lines[i - 2].rstrip() == lines[i].rstrip()
        first = i - 2 if over else i - 1
        before = lines[first - 1] if first > 0 else ""
        fits = len(lines[i].rstrip()) >= len(title.rstrip())
        if before.strip() or not fits or (not over and title[:1].isspace()):
            i += 1
            continue
        style = (under, over)
        if style not in styles:
            styles.append(style)
        found.append((_labelled(lines, first, found[-1][1] if found else 0), i + 1,
                      _plain(title), styles.index(style) + 1))
        i += 2
    return found


def _labelled(lines: list[str], first: int, floor: int) -> int:
    """The first line of a title's labels and the blank lines between them, else ``first``."""
    top, j = first, first - 1
    while j >= floor and (not lines[j].strip() or _LABEL.fullmatch(lines[j].rstrip())):
        if lines[j].strip():
            top = j
        j -= 1
    return top


def _plain(title: str) -> str:
    """A title's words without its inline markup, on one line."""
    return " ".join(_QUOTED.sub(r"\1", _LINK.sub(r"\1", _ROLE.sub("", title))).split())


def _adornment(line: str) -> str | None:
    """The character of ``line`` when it is a section adornment (see the module docstring)."""
    stripped = line.rstrip()
    return stripped[0] if _ADORNMENT.fullmatch(stripped) else None
