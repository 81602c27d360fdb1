"""Sections from the block parse with inline parsing of headings only are those of a full parse."""

from __future__ import annotations

import gzip
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from kbsync.extract.markdown import _ATTRIBUTES, MarkdownExtractor, split_sections, strip_noise
from kbsync.extract.sections import Heading, sections_at, source_lines
from kbsync.model import Section
from tests.conftest import corpora_file

_FULL = MarkdownIt("commonmark")


def _reference(text: str) -> tuple[Section, ...]:
    """The sections as a full parse (inline content of every block) gives them."""
    env: dict[str, object] = {}
    tokens = _FULL.parse(text, env)
    lines = strip_noise(source_lines(text), tokens, env)
    headings: list[Heading] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map is not None:
            parts = []
            for child in tokens[i + 1].children or ():
                if child.type in ("text", "image"):
                    parts.append(child.content)
                elif child.type == "code_inline":
                    parts.append(f"{child.markup}{child.content}{child.markup}")
                elif child.type in ("softbreak", "hardbreak"):
                    parts.append(" ")
            heading = _ATTRIBUTES.sub("", " ".join("".join(parts).split()))
            headings.append((token.map[0], token.map[1], heading, int(token.tag[1:])))
    return sections_at(lines, headings)


TRICKY = [
    "# A [linked][ref] title\n\ntext\n\n[ref]: https://example.org\n",
    "# Not [linked][nowhere]\n\nbody\n",
    "## `code` and *emphasis* and ![alt text](i.png)\n\npara\n\nSetext\n======\n\nmore",
    "intro\n\n> # quoted heading\n\n- # listed heading\n\n```\n# fenced\n```\n\n# Real { #real }",
    "# Line one\\\nstill the heading?\n\n#\n\n### <b>html</b> &amp; entities &copy;\n",
    "[ref]: /x 'title'\n# Before the *ref* [use][ref]\n",
]


def test_tricky_headings_give_the_sections_of_a_full_parse() -> None:
    for text in TRICKY:
        assert split_sections(text) == _reference(text), text


def test_real_documentation_gives_the_sections_of_a_full_parse() -> None:
    history = corpora_file("fastapi-docs-2023-history.jsonl.gz")
    with gzip.open(history, "rt", encoding="utf-8") as f:
        snapshot = json.loads(f.readline())
    pages = [t for p, t in sorted(snapshot["files"].items()) if p.endswith(".md")]
    assert len(pages) > 50
    for text in pages:
        assert split_sections(text) == _reference(text)


# Plain words and spaces (the headings that skip inline parsing) mixed with every
# character that starts inline markup, entities and escapes among them.
HEADING_PIECES = ["word", "Two Words", "  ", "\t", "é", "日本", "#", "-", "=", ":", "{", "}",
                  "(", ")", "'", '"', "\\", "`", "*", "_", "[", "]", "!", "<", ">", "&",
                  "&amp;", "&copy;", "<b>", "[a](b)", "`x`", "*y*"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(HEADING_PIECES), max_size=12).map("".join),
       st.sampled_from(["# {}\n\nbody", "### {} ###\ntext", "{}\n===\n\nbody"]))
def test_any_heading_gives_the_sections_of_a_full_parse(heading: str, form: str) -> None:
    text = form.format(heading)
    assert split_sections(text) == _reference(text)


def test_a_heading_keeps_the_backticks_of_its_code() -> None:
    """Search showed a heading "`kbsync sync`" as "kbsync sync": shown as written."""
    record = MarkdownExtractor().extract(b"# The `kbsync sync` command\n\nIt syncs.\n",
                                         locator="a.md")
    assert [s.heading for s in record.sections] == ["The `kbsync sync` command"]
