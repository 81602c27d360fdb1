"""Sections cut from a document's source lines at its headings (Markdown, reST)."""

from __future__ import annotations

from collections.abc import Sequence

from kbsync.model import Section

__all__ = ["Heading", "sections_at", "source_lines"]

Heading = tuple[int, int, str, int]
"""(first line, line after it, heading text, level) of a heading in a document's lines."""


def source_lines(text: str) -> list[str]:
    """The lines of ``text`` split at CR LF, CR and LF alone (as markdown-it numbers them)."""
    if not text:
        return []
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def sections_at(lines: Sequence[str], headings: Sequence[Heading]) -> tuple[Section, ...]:
    """One section per heading, holding the source lines up to the next one.

    Text before the first heading is a section without a heading (left out when
    blank); a heading with nothing under it is a section with empty text, and an
    empty heading text is no heading.
    """
    sections: list[Section] = []
    first = headings[0][0] if headings else len(lines)
    preamble = _body(lines, 0, first)
    if preamble:
        sections.append(Section(heading=None, text=preamble))
    for n, (_, after, heading, level) in enumerate(headings):
        end = headings[n + 1][0] if n + 1 < len(headings) else len(lines)
        sections.append(Section(heading=heading or None, text=_body(lines, after, end),
                                level=level if heading else 0))
    return tuple(sections)


def _body(lines: Sequence[str], start: int, end: int) -> str:
    """Source lines ``[start, end)`` without leading and trailing blank lines."""
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(line.rstrip() for line in lines[start:end])
