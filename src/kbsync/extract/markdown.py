"""Markdown: YAML front matter to typed metadata, headings to sections, the source kept as text.

Each section's body is the original Markdown source between two headings, so code
blocks, lists and tables stay verbatim; markdown-it-py only says where the
headings are (its token ``map`` gives their source lines), so text that looks
like a heading inside a code block never splits a section.

Markup that is no text a reader sees is left out (:func:`strip_noise`): link
reference definitions (``[label]: https://…``), HTML comments, and the label part
of reference-style links (``[text][label]`` is ``text``). In the Rust book the best
full-text hit for "what is a trait object" was a line of link definitions.
"""

from __future__ import annotations

import datetime
import math
import re

import yaml
from markdown_it import MarkdownIt
from markdown_it.common.utils import normalizeReference
from markdown_it.token import Token

from kbsync.extract.sections import Heading, sections_at, source_lines
from kbsync.extract.text import TITLE_MAX_CHARS, charset_of, decode, replacement_warnings
from kbsync.model import MetadataValue, Record, Section

__all__ = ["MarkdownExtractor", "parse_front_matter", "split_sections", "strip_noise"]

_BLOCKS = MarkdownIt("commonmark").disable("inline")
"""Block structure only: inline parsing (emphasis, links, code spans) of every paragraph
was half of the parse, and only headings need it. Stateless between calls."""
_INLINE = MarkdownIt("commonmark")
# The characters that start inline markup in CommonMark (escapes, code spans, emphasis,
# links, images, autolinks and HTML, entities, line breaks): a heading without any is
# its own plain text, and parsing it would cost a tenth of a Markdown file's extraction.
_INLINE_MARKUP = frozenset("\\`*_[]!<>&\n")

_FRONT_MATTER_END = frozenset({"---", "..."})
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # LibYAML's when PyYAML has it
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
        # v3: link definitions, comments and link labels left out; v4: code in headings
        # keeps its backticks
        return "markdown-v4"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Title: front matter ``title``, else the first level-1 heading, else None.

        The front matter's ``description`` is the record's description and stays in
        its metadata too (it is stored with the document).
        """
        decoded = decode(data, locator, declared_encoding=charset_of(media_type),
                         strict=self.strict_decoding)
        metadata, body, problem = parse_front_matter(decoded.text)
        sections = split_sections(body)
        titled = metadata.pop("title", None)
        title = (_as_text(titled) if titled is not None else None) or next(
            (s.heading for s in sections if s.level == 1 and s.heading), None
        )
        described = metadata.get("description")
        warnings = replacement_warnings(decoded)
        return Record(
            title=title[:TITLE_MAX_CHARS] if title else None,
            description=_as_text(described) if described is not None else None,
            sections=sections,
            metadata=tuple(sorted(metadata.items())),
            warnings=(*warnings, problem) if problem else warnings,
        )


def parse_front_matter(text: str) -> tuple[dict[str, MetadataValue], str, str | None]:
    """Split a leading ``---`` front matter block off; return its values, the rest, and a
    warning when the block is not YAML.

    The block is read by a YAML library (``safe_load``), and values keep their types:
    text (trimmed), numbers, booleans, dates and times (as ISO 8601 text), lists of those
    (``tags: [intro, install]``); empty values, nested mappings and lists in lists are left
    out. A block that is not YAML is read as flat ``key: value`` lines (the warning says
    so). Without a closing ``---`` or ``...`` line there is no front matter.
    """
    lines = source_lines(text)
    if not lines or lines[0].rstrip() != "---":
        return {}, text, None
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in _FRONT_MATTER_END), None)
    if end is None:
        return {}, text, None
    block, body = lines[1:end], "\n".join(lines[end + 1 :])
    try:
        loaded = yaml.load("\n".join(block), Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        return (_loose_front_matter(block), body,
                f"front matter is not YAML{where}: {problem}; read as key: value lines")
    if not isinstance(loaded, dict):
        return {}, body, None
    metadata: dict[str, MetadataValue] = {}
    for key, value in loaded.items():
        typed = _typed(value)
        if key is not None and typed is not None:
            metadata[str(key)] = typed
    return metadata, body, None


def _typed(value: object) -> MetadataValue | None:
    """A YAML value as metadata keeps it; None for what it leaves out."""
    if isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no NaN
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date too
        return value.isoformat()
    if isinstance(value, (list, tuple, set)):
        # Items of a list only, not lists in it: an alias bomb of nested lists is never walked.
        items = [_typed(v) for v in value if not isinstance(v, (list, tuple, set, dict))]
        kept = tuple(item for item in items if item is not None)
        return kept or None
    return None  # a mapping, binary data


def _as_text(value: MetadataValue) -> str:
    """A front matter value where text is wanted (the title, the description)."""
    if isinstance(value, tuple):
        return ", ".join(_as_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _loose_front_matter(block: list[str]) -> dict[str, MetadataValue]:
    """Flat ``key: value`` lines of a block that is not YAML (one pair of quotes removed);
    lines that are no such pair are skipped."""
    metadata: dict[str, MetadataValue] = {}
    for line in block:
        if not line or line[0] in " \t#-" or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), _unquote(value.strip())
        if key and value:
            metadata[key] = value
    return metadata


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
    lines = strip_noise(lines, tokens, env)
    # (first line, line after the heading, heading text, level) for each top-level heading
    headings: list[Heading] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map is not None:
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            heading = "" if inline is None else _ATTRIBUTES.sub("", _heading_text(inline, env))
            headings.append((token.map[0], token.map[1], heading, int(token.tag[1:])))

    return sections_at(lines, headings)


# A code span (kept whole), an HTML comment, or a reference-style link or image:
# ``[text][label]``, ``[label][]`` or ``[label]`` (the last only when not followed by
# ``(``, ``[`` or ``:``, which make it an inline link, another reference or a definition).
_INLINE_NOISE = re.compile(
    r"(?P<code>(?P<ticks>`+)[\s\S]*?(?<!`)(?P=ticks)(?!`))"
    r"|(?P<comment><!--[\s\S]*?-->)"
    r"|(?P<bang>!?)\[(?P<text>[^\[\]\n]*)\](?:\[(?P<label>[^\[\]\n]*)\]|(?![(\[:]))")
_COMMENT_BLOCK = re.compile(r"\s*(?:<!--[\s\S]*?-->\s*)+")


def strip_noise(lines: list[str], tokens: list[Token], env: dict[str, object]) -> list[str]:
    """The source lines without the markup a reader never sees, line for line (a line
    left out is blank, so the block parser's line numbers still hold).

    Link reference definitions are the non-blank lines no top-level block holds (the
    block parser makes no token of them); a block that is only HTML comments is left
    out, comments inside text too; a reference-style link or image keeps its text
    (``[text][label]`` and ``![alt][label]`` are ``text`` and ``alt``, ``[label][]``
    and ``[label]`` are ``label``) when ``label`` is defined, as CommonMark reads it.
    Code blocks and code spans are kept verbatim.
    """
    references = env.get("references")
    defined = set(references) if isinstance(references, dict) else set()
    out = list(lines)
    covered = [False] * len(lines)
    code = [False] * len(lines)
    for token in tokens:
        if token.map is None:
            continue
        first, after = token.map
        if token.level == 0:
            for n in range(first, min(after, len(lines))):
                covered[n] = True
        if token.type in ("fence", "code_block"):
            for n in range(first, min(after, len(lines))):
                code[n] = True
        elif token.type == "html_block" and _COMMENT_BLOCK.fullmatch(token.content):
            for n in range(first, min(after, len(lines))):
                out[n] = ""
                code[n] = True  # nothing left to clean
    for n, line in enumerate(lines):
        if not covered[n] and line.strip():
            out[n] = ""  # a link reference definition (or its continuation)
    if not defined and not any("<!--" in line for line in out):
        return out
    n = 0
    while n < len(out):  # each run of lines outside code, cleaned as one text
        if code[n]:
            n += 1
            continue
        end = n
        while end < len(out) and not code[end]:
            end += 1
        cleaned = _INLINE_NOISE.sub(lambda m: _plain(m, defined), "\n".join(out[n:end]))
        kept = cleaned.split("\n")
        out[n:end] = kept + [""] * (end - n - len(kept))  # a comment over lines took some
        n = end
    return out


def _plain(match: re.Match[str], defined: set[str]) -> str:
    """What a reader sees of one match of :data:`_INLINE_NOISE`."""
    if match["code"] is not None:
        return match["code"]
    if match["comment"] is not None:
        return "\n" * match["comment"].count("\n")  # the lines it spanned stay lines
    text, label = match["text"], match["label"]
    name = label if label else text  # [text][label]; [label][] and [label] name themselves
    if normalizeReference(name) not in defined:
        return match[0]
    return text


def _heading_text(inline: Token, env: dict[str, object]) -> str:
    """A heading's inline content as plain text: markup dropped, image alt text kept, and
    code kept as the document wrote it, in its backticks (a heading "`kbsync sync`" names a
    command, which "kbsync sync" no longer says)."""
    if _INLINE_MARKUP.isdisjoint(inline.content):  # most headings: nothing to parse
        return " ".join(inline.content.split())
    parsed = _INLINE.parseInline(inline.content, env)
    parts: list[str] = []
    for child in (parsed[0].children or ()) if parsed else ():
        if child.type in ("text", "image"):
            parts.append(child.content)
        elif child.type == "code_inline":
            parts.append(f"{child.markup}{child.content}{child.markup}")
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return " ".join("".join(parts).split())


def _unquote(value: str) -> str:
    """Remove one pair of matching quotes around a front matter value."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
