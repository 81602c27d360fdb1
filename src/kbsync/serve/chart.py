"""A small inline SVG bar chart of embeddings computed and reused per run, drawn server-side.

Drawn here rather than in the browser so that the page needs no script and the
chart is in the HTML that tests and screen readers see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

__all__ = ["COMPUTED_COLOUR", "KEPT_COLOUR", "REUSED_COLOUR", "STAGE_COLOURS", "embeddings_chart",
           "stacked_chart"]

COMPUTED_COLOUR = "#d9822b"
REUSED_COLOUR = "#4a7bb7"
KEPT_COLOUR = "#8fb08a"
# The bars of each run: the fields of the report's vocabulary, each with its colour.
_BARS = (("computed", COMPUTED_COLOUR), ("reused", REUSED_COLOUR), ("kept", KEPT_COLOUR))
_WIDTH, _HEIGHT = 640, 200
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 8, 28, 24


def embeddings_chart(series: Sequence[Mapping[str, Any]]) -> str:
    """SVG markup: for each run (oldest left) a bar of embeddings computed, reused and kept.

    ``series`` items have ``run``, ``computed``, ``reused`` and ``kept`` (0 when absent),
    in the meanings of :func:`kbsync.serve.views` ``_vectors``. Every value written
    into the markup is a number or escaped, so the result is safe to embed.
    """
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    top = max([1, *(int(p.get(f, 0)) for p in series for f, _ in _BARS)])
    slot = plot_w / max(len(series), 1)
    bar = max(1.0, min(14.0, slot * 0.26))
    base = _TOP + plot_h
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
        f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="chart-title">',
        '<title id="chart-title">Embeddings computed, reused and kept per run</title>',
        _legend(),
        f'<line x1="{_LEFT}" y1="{base}" x2="{_WIDTH - _RIGHT}" y2="{base}" stroke="#999"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{base}" stroke="#999"/>',
        f'<text x="{_LEFT - 6}" y="{_TOP + 4}" text-anchor="end" class="tick">{top}</text>',
        f'<text x="{_LEFT - 6}" y="{base}" text-anchor="end" class="tick">0</text>',
    ]
    if not series:
        parts.append(f'<text x="{_LEFT + plot_w / 2}" y="{_TOP + plot_h / 2}" '
                     'text-anchor="middle" class="tick">no runs yet</text>')
    label_every = max(1, len(series) // 10)
    values_shown = len(series) <= 12  # numbers over the bars while they fit
    for i, point in enumerate(series):
        x = _LEFT + i * slot + (slot - len(_BARS) * bar) / 2
        run = int(point["run"])
        for j, (field, colour) in enumerate(_BARS):
            value = int(point.get(field, 0))
            h = plot_h * value / top
            parts.append(
                f'<rect x="{x + j * bar:.1f}" y="{base - h:.1f}" width="{bar:.1f}" '
                f'height="{h:.1f}" fill="{colour}"><title>run {run}: {value} '
                f'{escape(field)}</title></rect>')
            if values_shown:
                parts.append(f'<text x="{x + j * bar + bar / 2:.1f}" y="{base - h - 3:.1f}" '
                             f'text-anchor="middle" class="tick">{value}</text>')
        if i % label_every == 0:
            parts.append(f'<text x="{x + 1.5 * bar:.1f}" y="{base + 15}" text-anchor="middle" '
                         f'class="tick">#{run}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    items = []
    for i, (label, colour) in enumerate(_BARS):
        x = _LEFT + i * 110
        items.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{colour}"/>'
                     f'<text x="{x + 17}" y="18" class="tick">{label}</text>')
    return "".join(items)


STAGE_COLOURS = ("#4a7bb7", "#d9822b", "#8fb08a", "#b05f9e", "#c9b037", "#6c6c6c", "#5fb0b0")
"""Colours of the stages of a sync, in the order the run reports them."""


def stacked_chart(series: Sequence[Mapping[str, Any]], parts: Sequence[tuple[str, str]],
                  title: str, unit: str = "") -> str:
    """SVG markup: for each run (oldest left, ``series`` items with ``run``) one bar stacked
    of ``parts``, each ``(field, colour)``; a single part is a plain bar chart.

    Every value written into the markup is a number or escaped, so the result is safe to
    embed. ``unit`` follows the values in the bars' tooltips.
    """
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    totals = [sum(float(p.get(f, 0) or 0) for f, _ in parts) for p in series]
    top = max([0.0, *totals]) or 1.0
    slot = plot_w / max(len(series), 1)
    bar = max(1.0, min(28.0, slot * 0.6))
    base = _TOP + plot_h
    ident = "chart-" + "".join(c for c in title.lower() if c.isalnum())[:24]
    parts_svg = [
        f'<svg class="chart" role="img" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
        f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="{ident}">',
        f'<title id="{ident}">{escape(title)}</title>',
        "" if len(parts) == 1 else _keys(parts),
        f'<line x1="{_LEFT}" y1="{base}" x2="{_WIDTH - _RIGHT}" y2="{base}" stroke="#999"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{base}" stroke="#999"/>',
        f'<text x="{_LEFT - 6}" y="{_TOP + 4}" text-anchor="end" class="tick">'
        f'{_number(top)}</text>',
        f'<text x="{_LEFT - 6}" y="{base}" text-anchor="end" class="tick">0</text>',
    ]
    if not series:
        parts_svg.append(f'<text x="{_LEFT + plot_w / 2}" y="{_TOP + plot_h / 2}" '
                         'text-anchor="middle" class="tick">no runs yet</text>')
    label_every = max(1, len(series) // 10)
    for i, point in enumerate(series):
        x = _LEFT + i * slot + (slot - bar) / 2
        run = int(point["run"])
        y = float(base)
        for field, colour in parts:
            value = float(point.get(field, 0) or 0)
            h = plot_h * value / top
            y -= h
            parts_svg.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{colour}"><title>run {run}: {_number(value)}{escape(unit)} '
                f'{escape(field)}</title></rect>')
        if len(series) <= 12:
            parts_svg.append(f'<text x="{x + bar / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" '
                             f'class="tick">{_number(totals[i])}</text>')
        if i % label_every == 0:
            parts_svg.append(f'<text x="{x + bar / 2:.1f}" y="{base + 15}" '
                             f'text-anchor="middle" class="tick">#{run}</text>')
    parts_svg.append("</svg>")
    return "".join(parts_svg)


def _number(value: float) -> str:
    """A value as a tick shows it: whole numbers with separators, small ones to 2 places."""
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _keys(parts: Sequence[tuple[str, str]]) -> str:
    items = []
    for i, (field, colour) in enumerate(parts):
        x = _LEFT + i * 130
        label = field.replace("tokens_", "").replace("_", " ")
        items.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{colour}"/>'
                     f'<text x="{x + 17}" y="18" class="tick">{escape(label)}</text>')
    return "".join(items)
