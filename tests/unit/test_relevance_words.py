"""The number a search shows beside each hit is its relevance, and the documents call it so.

The command line, the dashboard and MCP print ``relevance``; a README that called it a
score sent readers to ``score``, the ranking's raw value, which is not in [0, 1].
"""

from __future__ import annotations

import re

from rich.console import Console

from kbsync.cli.render import hit_blocks
from kbsync.store import Hit
from tests.conftest import ROOT


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_command_line_shows_each_hit_with_its_relevance() -> None:
    console = Console(width=100, record=True, color_system=None)
    hit = Hit(source="docs", key="a.md", title=None, heading="Tides", index=0, start=0,
              end=11, score=7.25, text="Tides turn.", digest="d", rank=1, relevance=0.5)
    console.print(hit_blocks([hit]))
    shown = console.export_text()
    assert "relevance 0.5" in shown
    assert "7.25" not in shown


def test_the_readme_calls_the_number_a_search_shows_its_relevance() -> None:
    readme = _readme()
    blocks = readme[readme.index("Search hits print as blocks"):]
    blocks = blocks[: blocks.index(".") + 1]
    assert "relevance" in blocks
    assert "score" not in blocks
    assert "search (heading, relevance, text)" in readme  # the dashboard's
    assert "Filters and readable scores" not in readme


def test_the_python_examples_print_the_relevance() -> None:
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        examples = re.findall(r"for hit in kb\.search\(.*\n\s+print\((.*)\)",
                              page.read_text(encoding="utf-8"))
        assert examples, page
        assert all("hit.relevance" in line and "hit.score" not in line for line in examples)
