"""Markdown: YAML front matter to metadata, headings to sections, the source kept as text.

Each section's body is the original Markdown source between two headings, so code
blocks, lists and tables stay verbatim; markdown-it-py only says where the
headings are (its token ``map`` gives their source lines), so text that looks
like a heading inside a code block never splits a section.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from kbsync.extract.sections import Heading, sections_at, source_lines
from kbsync.extract.text import TITLE_MAX_CHARS, charset_of, decode, replacement_warnings
from kbsync.model import Record, Section

__all__ = ["MarkdownExtractor", "parse_front_matter", "split_sections"]

_BLOCKS = MarkdownIt("commonmark").disable("inline")
"""Block structure only: inline parsing (emphasis, links, code spans) of every paragraph
was half of the parse, and only headings need it. Stateless between calls."""
_INLINE = MarkdownIt("commonmark")
# The characters that start inline markup in CommonMark (escapes, code spans, emphasis,
# links, images, autolinks and HTML, entities, line breaks): a heading without any is
# its own plain text, and parsing it would cost a tenth of a Markdown file's extraction.
_INLINE_MARKUP = frozenset("\\`*_[]!<>&\n")

_FRONT_MATTER_END = frozenset({"---", "..."})
# A trailing attribute list of a heading (Python-Markdown attr_list, Pandoc, kramdown):
# `{ #cors }`, `{#id .class}`, `{: #id }`, `{ .class key=value }`. Only ids, classes and
# key=value pairs, so a heading that ends in `{item_id}` keeps it.
_ATTRIBUTE = r"""(?:[#.][^\s{}]+|[\w-]+=(?:"[^"]*"|'[^']*'|[^\s{}"']+))"""
_ATTRIBUTES = re.compile(rf"\s*\{{:?\s*{_ATTRIBUTE}(?:\s+{_ATTRIBUTE})*\s*\}}\s*$")


class MarkdownExtractor:
    """Markdown documents: one section per ATX or setext heading, front matter as metadata."""

    def __init__(self, *, strict_decoding: bool = False) -> None:
        self.strict_decoding = strict_decoding  # see TextExtractor

    @property
    def identity(self) -> str:
        """Name and version; it has no settings."""
        return "markdown-v2"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Title: front matter ``title``, else the first level-1 heading, else None.

        The front matter's ``description`` is the record's description and stays in
        its metadata too (it is stored with the document).
        """
        decoded = decode(data, locator, declared_encoding=charset_of(media_type),
                         strict=self.strict_decoding)
        metadata, body = parse_front_matter(decoded.text)
        sections = split_sections(body)
        title = metadata.pop("title", None) or next(
            (s.heading for s in sections if s.level == 1 and s.heading), None
        )
        description = metadata.get("description") or None
        return Record(
            title=title[:TITLE_MAX_CHARS] if title else None,
            description=description,
            sections=sections,
            metadata=tuple(sorted(metadata.items())),
            warnings=replacement_warnings(decoded),
        )


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Split a leading ``---`` front matter block off; return its ``key: value`` pairs and the rest.

    A small subset of YAML, so no YAML library is needed: flat ``key: value``
    lines (one pair of quotes removed), block scalars (``|`` keeps line breaks,
    ``>`` folds them) and lists of ``- item`` lines (joined with ", "); nested
    mappings and comments are skipped. Without a closing ``---`` or ``...``
    line there is no front matter.
    """
    lines = source_lines(text)
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in _FRONT_MATTER_END), None)
    if end is None:
        return {}, text
    metadata: dict[str, str] = {}
    block = lines[1:end]
    i = 0
    while i < len(block):
        line = block[i]
        i += 1
        if not line or line[0] in " \t#-" or ":" not in line:
            continue  # a nested value, list item or comment outside a key, or not a pair
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        nested: list[str] = []
        while i < len(block) and (not block[i].strip() or block[i][0] in " \t-"):
            nested.append(block[i].strip())
            i += 1
        if value[:1] in ("|", ">") and value.rstrip("+-") in ("|", ">"):
            value = ("\n" if value[0] == "|" else " ").join(n for n in nested if n).strip()
        elif not value and nested and all(n.startswith("-") for n in nested if n):
            value = ", ".join(_unquote(n[1:].strip()) for n in nested if n[1:].strip())
        else:
            value = _unquote(value)
        if key and value:
            metadata[key] = value
    return metadata, "\n".join(lines[end + 1 :])


def split_sections(text: str) -> tuple[Section, ...]:
    """Split Markdown source at its top-level headings into sections.

    Text before the first heading is a section without a heading (omitted when
    blank); a heading with nothing under it is a section with empty text.
    Headings inside block quotes or list items do not split. A heading's trailing
    attribute list (``## CORS { #cors }``) is markup, not part of its text.
    """
    lines = source_lines(text)
    env: dict[str, object] = {}  # the link reference definitions a heading's links may use
    tokens = _BLOCKS.parse(text, env)
    # (first line, line after the heading, heading text, level) for each top-level heading
    headings: list[Heading] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map is not None:
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            heading = "" if inline is None else _ATTRIBUTES.sub("", _heading_text(inline, env))
            headings.append((token.map[0], token.map[1], heading, int(token.tag[1:])))

    return sections_at(lines, headings)


def _heading_text(inline: Token, env: dict[str, object]) -> str:
    """A heading's inline content as plain text: markup dropped, code and image alt text kept."""
    if _INLINE_MARKUP.isdisjoint(inline.content):  # most headings: nothing to parse
        return " ".join(inline.content.split())
    parsed = _INLINE.parseInline(inline.content, env)
    parts: list[str] = []
    for child in (parsed[0].children or ()) if parsed else ():
        if child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return " ".join("".join(parts).split())


def _unquote(value: str) -> str:
    """Remove one pair of matching quotes around a front matter value."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
