"""The dashboard's pure helpers: highlighted segments of a text and the SVG chart."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("starlette")

from kbsync.serve.chart import embeddings_chart
from kbsync.serve.views import segments

SVG = "{http://www.w3.org/2000/svg}"


def _region(offset: int, length: int) -> dict[str, int]:
    return {"offset": offset, "length": length}


def test_segments_put_the_text_back_together_and_mark_exactly_the_regions() -> None:
    text = "alpha beta gamma delta epsilon"
    parts = segments(text, [_region(6, 4), _region(17, 5)])
    assert "".join(p for p, _ in parts) == text
    assert [p for p, kind in parts if kind == "changed"] == ["beta", "delta"]


def test_segments_with_context_leave_out_far_unchanged_lines_as_gaps() -> None:
    lines = [f"line {i:02d} of the document" for i in range(40)]
    text = "\n".join(lines)
    at = text.index("line 20")
    parts = segments(text, [_region(at, len(lines[20]))], context=60)
    kinds = [kind for _, kind in parts]
    assert kinds == ["gap", "same", "changed", "same", "gap"]
    before, after = parts[1][0], parts[3][0]
    assert before.startswith("line ")  # the context starts at a line, not mid-word
    assert len(before) <= 60
    assert len(after) <= 60
    assert "line 05" not in "".join(p for p, _ in parts)


def test_segments_without_regions_keep_the_whole_text() -> None:
    assert segments("short text", [], context=2) == [("short text", "same")]


def test_the_chart_is_well_formed_svg_with_three_bars_a_run_scaled_to_the_largest() -> None:
    series = [{"run": 1, "computed": 90, "reused": 0, "kept": 0},
              {"run": 2, "computed": 3, "reused": 45, "kept": 30}]
    svg = ET.fromstring(embeddings_chart(series))
    bars = [r for r in svg.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    assert [b.find(f"{SVG}title").text for b in bars] == [  # type: ignore[union-attr]
        "run 1: 90 computed", "run 1: 0 reused", "run 1: 0 kept",
        "run 2: 3 computed", "run 2: 45 reused", "run 2: 30 kept"]
    heights = [float(b.get("height", "0")) for b in bars]
    assert heights[0] == max(heights)
    assert heights[4] == pytest.approx(heights[0] / 2, rel=0.01)
    assert heights[1] == 0.0


def test_the_chart_of_no_runs_says_so() -> None:
    svg = ET.fromstring(embeddings_chart([]))
    assert "no runs yet" in "".join(svg.itertext())
