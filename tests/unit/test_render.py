"""Rendering of change excerpts for people (``kbsync diff``)."""

from __future__ import annotations

from kbsync.cli.render import highlighted
from kbsync.model import Region


def _plain(text: str, regions: list[Region], context: int = 200, limit: int = 20) -> str:
    return highlighted(text, regions, context, marks=("{+", "+}"), limit=limit).plain


def test_an_excerpt_is_the_changed_line_with_its_words_whole() -> None:
    text = "First line stays.\nThe second line got a new word here.\nThird line stays.\n"
    at = text.index("new")
    assert _plain(text, [Region(at, 3)]) == "The second line got a {+new+} word here."


def test_a_long_line_is_cut_at_words_and_marked_where_it_goes_on() -> None:
    text = " ".join(f"word{i}" for i in range(200))
    at = text.index("word100")
    out = _plain(text, [Region(at, len("word100"))], context=30)
    assert out.startswith("…word")
    assert out.endswith("…")
    assert "{+word100+}" in out
    assert all(part.startswith("word") for part in out.strip("…").replace("{+", "").split())


def test_excerpts_apart_are_separated_and_each_keeps_the_context_after_it() -> None:
    lines = [f"line {i} says something ordinary" for i in range(40)]
    text = "\n".join(lines)
    first, second = text.index("line 3 "), text.index("line 30 ")
    out = _plain(text, [Region(first, 6), Region(second, 7)], context=40)
    assert out.split("\n⋯\n") == ["{+line 3+} says something ordinary",
                                  "{+line 30+} says something ordinary"]


def test_regions_that_share_a_line_are_one_excerpt() -> None:
    text = "alpha beta gamma delta epsilon\nzeta\n"
    out = _plain(text, [Region(0, 5), Region(text.index("delta"), 5)])
    assert out == "{+alpha+} beta gamma {+delta+} epsilon"


def test_past_the_limit_excerpts_are_counted_not_shown() -> None:
    text = "\n".join(f"row {i}" for i in range(30))
    regions = [Region(text.index(f"row {i}\n"), len(f"row {i}")) for i in range(0, 30, 2)]
    out = _plain(text, regions, limit=3)
    assert out.count("\n⋯\n") == 3
    assert out.endswith("12 more changed regions not shown (`--json` lists them all)")


def test_changes_on_neighbouring_lines_read_as_one_excerpt() -> None:
    text = "a X\nb Y\n"
    assert _plain(text, [Region(2, 1), Region(6, 1)]) == "a {+X+}\nb {+Y+}"


def test_a_context_that_ends_on_a_line_boundary_keeps_its_first_and_last_words() -> None:
    text = "\n" + "alpha beta gamma Z tail\n" + "next line"
    at = text.index("Z")
    assert _plain(text, [Region(at, 1)], context=at - 1) == "alpha beta gamma {+Z+} tail"
    assert _plain(text, [Region(at, 1)], context=len(" tail")) == "…{+Z+} tail"


def test_regions_given_out_of_order_are_each_shown_once() -> None:
    text = "aaa bbb\n"
    assert _plain(text, [Region(4, 3), Region(0, 3)]) == "{+aaa+} {+bbb+}"


def test_search_results_from_several_sources_say_which_source_each_is_from() -> None:
    from rich.console import Console

    from kbsync.cli.render import hit_blocks
    from kbsync.store import Hit

    def hit(source: str, rank: int) -> Hit:
        return Hit(source, "index.md", None, "Intro", 0, 0, 4, 1.0, "text", "d", rank=rank)

    console = Console(width=100, record=True)
    console.print(hit_blocks([hit("repo", 1), hit("office", 2)]))
    text = console.export_text()
    assert "1. index.md (repo) › Intro" in text
    assert "2. index.md (office) › Intro" in text
    console.print(hit_blocks([hit("repo", 1)]))
    assert "(repo)" not in console.export_text()  # one source: the key says enough


def test_a_hits_relevance_stays_whole_in_a_narrow_terminal_and_the_rank_with_its_key(
) -> None:
    from rich.console import Console

    from kbsync.cli.render import hit_blocks
    from kbsync.store import Hit

    long_heading = "A heading long enough to wrap in a narrow terminal window"
    hit = Hit("docs", "guide/install.md", None, long_heading, 0, 0, 4, 1.0, "text", "d",
              rank=1, relevance=0.87)
    console = Console(width=40, record=True)
    console.print(hit_blocks([hit]))
    lines = console.export_text().splitlines()
    assert lines[0].startswith("1. guide/install.md › A heading")
    assert sum("relevance 0.87" in line for line in lines) == 1
    assert max(len(line) for line in lines) <= 40
    assert all(line == line.rstrip() for line in lines)  # no padding to the width


def test_only_a_hit_as_relevant_as_the_best_shows_a_relevance_of_one() -> None:
    from rich.console import Console

    from kbsync.cli.render import hit_blocks
    from kbsync.store import Hit

    def hit(rank: int, relevance: float) -> Hit:
        return Hit("docs", f"doc{rank}.md", None, None, 0, 0, 4, 1.0, "text", "d",
                   rank=rank, relevance=relevance)

    console = Console(width=100, record=True)
    # An exact match's cosine in float32 is 0.99999988; 0.29 * 100 is just under 29.
    console.print(hit_blocks([hit(1, 0.99999988), hit(2, 0.996), hit(3, 0.29)]))
    text = console.export_text()
    assert "relevance 1.00" in text
    assert "relevance 0.99" in text
    assert "relevance 0.29" in text


def test_a_long_key_folds_onto_more_lines_after_a_slash_and_is_never_cut() -> None:
    from rich.console import Console

    from kbsync.cli.render import hit_blocks
    from kbsync.store import Hit

    key = "https://docs.example.com/en/stable/reference/configuration/advanced/" + "x" * 30
    hit = Hit("docs", key, None, None, 0, 0, 4, 1.0, "text", "d", rank=1, relevance=0.5)
    console = Console(width=60, record=True)
    console.print(hit_blocks([hit]))
    lines = console.export_text().splitlines()
    assert "…" not in "\n".join(lines)
    assert lines[0].startswith("1. https://docs.example.com/")
    assert lines[0].endswith("/")  # broken after a slash, not inside a word
    head = "".join(line.split("relevance")[0].strip() for line in lines[:3])
    assert key in head
    assert any(line.endswith("relevance 0.50") for line in lines)


def test_a_near_identical_text_never_reads_as_similarity_one() -> None:
    from kbsync.cli.render import rounded_down

    assert rounded_down(0.9995, 3) == "0.999"  # five new lines in a 700 KB file
    assert rounded_down(1.0, 3) == "1.000"
    assert rounded_down(0.99999988, 2) == "1.00"  # an exact match's float32 cosine
    assert rounded_down(0.29, 2) == "0.29"


def test_a_hit_cut_inside_a_code_block_keeps_its_line_breaks() -> None:
    """`search --context 0` printed a code block as one line: a chunk can start or end
    inside one, where no fence says it is code."""
    from kbsync.cli.render import _reflowed

    started_inside = "a = 1\nb = 2\nprint(a)\n```\n\nThe result is\nprinted."
    assert _reflowed(started_inside) == "a = 1\nb = 2\nprint(a)\n```\n\nThe result is printed."
    ends_inside = "Run it:\nnow.\n\n```python\na = 1\nb = 2"
    assert _reflowed(ends_inside) == "Run it: now.\n\n```python\na = 1\nb = 2"
    whole = "Text\nwrapped.\n```\nx = 1\ny = 2\n```\nmore\ntext"
    assert _reflowed(whole) == "Text wrapped.\n```\nx = 1\ny = 2\n```\nmore text"


def test_the_stage_table_leaves_out_a_stage_that_had_nothing_to_do() -> None:
    from rich.console import Console

    from kbsync.cli.render import sync_tables
    from kbsync.report import SyncResult

    report = SyncResult(dry_run=False, started="2026-01-01T00:00:00+00:00",
                        finished="2026-01-01T00:00:01+00:00", documents={}, sources=(),
                        seconds={"list": 0.25, "apply": 0.002, "index": 0.0001},
                        diagnostics=None)
    console = Console(width=100, record=True)
    for table in sync_tables(report):
        console.print(table)
    shown = console.export_text()
    assert "list" in shown
    assert "apply" in shown
    assert "index" not in shown
