"""Small inline SVG line charts: one metric over time, a line per series, the threshold dashed.

Hand-written so the report opens offline with no script and no CDN.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")

Point = tuple[datetime, float | None]

LEGEND_CHAR_W = 6.2  # an upper bound of a sans-serif 10px glyph's advance, so estimated boxes cover the text
LEGEND_ROW_H = 13
LEGEND_GAP = 12


@dataclass(frozen=True)
class Box:
    x: float
    y: float  # top
    w: float
    h: float

    def intersects(self, other: Box) -> bool:
        return (
            self.x < other.x + other.w
            and other.x < self.x + self.w
            and self.y < other.y + other.h
            and other.y < self.y + self.h
        )


def legend_layout(labels: Sequence[str], *, left: float, top: float, width: float) -> list[Box]:
    """Legend entries placed left to right, wrapping to a new row when the next would not fit:
    no two boxes intersect and none leaves ``[left, left + width]`` (a label longer than the
    width gets a row of its own and is shortened by :func:`legend_text`)."""
    boxes: list[Box] = []
    x, y = left, top
    for label in labels:
        w = min(width, (len(legend_text(label, width)) + 2) * LEGEND_CHAR_W)
        if x > left and x + w > left + width:
            x, y = left, y + LEGEND_ROW_H
        boxes.append(Box(x, y, w, LEGEND_ROW_H - 2))
        x += w + LEGEND_GAP
    return boxes


def legend_text(label: str, width: float) -> str:
    """The label, shortened with ``…`` to fit ``width`` (the marker takes two characters)."""
    fits = max(4, int(width / LEGEND_CHAR_W) - 2)
    return label if len(label) <= fits else label[: fits - 1] + "…"


@dataclass(frozen=True)
class Chart:
    title: str
    series: Mapping[str, Sequence[Point]]  # label → points in time order
    threshold: float | None = None
    threshold_label: str = ""


def trend_svg(chart: Chart, *, width: int = 420, height: int = 190) -> str:
    """One chart as a standalone ``<svg>`` element; the legend is laid out below the plot
    (:func:`legend_layout`), and the chart grows by a row per wrapped legend row."""
    left, right, top, bottom = 44, 10, 22, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    legend = legend_layout(list(chart.series), left=4, top=top + plot_h + 16, width=width - 8)
    if legend:
        height = max(height, int(legend[-1].y + legend[-1].h + 4))
    times = [t.timestamp() for points in chart.series.values() for t, _ in points]
    values = [v for points in chart.series.values() for _, v in points if v is not None]
    if chart.threshold is not None:
        values.append(chart.threshold)
    low, high = _y_range(values)
    t0, t1 = (min(times), max(times)) if times else (0.0, 1.0)
    span = (t1 - t0) or 1.0

    def x(t: datetime) -> float:
        return left + (t.timestamp() - t0) / span * plot_w if t1 > t0 else left + plot_w / 2

    def y(v: float) -> float:
        return top + (1 - (v - low) / ((high - low) or 1.0)) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(chart.title)}" '
        'font-family="sans-serif" font-size="10">',
        f"<title>{escape(chart.title)}</title>",
        f'<text x="{left}" y="14" font-size="12" font-weight="bold">{escape(chart.title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>',
        f'<text x="{left - 4}" y="{top + 4}" text-anchor="end">{high:g}</text>',
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">{low:g}</text>',
    ]
    if times:
        for t, anchor in ((t0, "start"), (t1, "end")):
            label = datetime.fromtimestamp(t, UTC).date().isoformat()
            parts.append(
                f'<text x="{left if anchor == "start" else left + plot_w}" y="{top + plot_h + 12}" '
                f'text-anchor="{anchor}">{label}</text>'
            )
    if chart.threshold is not None:
        ty = y(chart.threshold)
        parts.append(
            f'<line class="threshold" x1="{left}" x2="{left + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}" '
            'stroke="#d62728" stroke-dasharray="4 3"/>'
            f'<text x="{left + plot_w - 2}" y="{ty - 3:.1f}" text-anchor="end" fill="#d62728">'
            f"{escape(chart.threshold_label or f'{chart.threshold:g}')}</text>"
        )
    for index, (label, points) in enumerate(chart.series.items()):
        colour = COLOURS[index % len(COLOURS)]
        for segment in _segments(points):
            coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in segment)
            parts.append(
                f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}"/>'
            )
            if len(segment) < 40:
                parts.extend(
                    f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.2" fill="{colour}"/>' for t, v in segment
                )
        box = legend[index]
        parts.append(
            f'<text class="legend" x="{box.x:.1f}" y="{box.y + box.h - 2:.1f}" fill="{colour}">'
            f"■ {escape(legend_text(label, width - 8))}<title>{escape(label)}</title></text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def sparkline_svg(values: Sequence[float | None], *, width: int = 120, height: int = 22) -> str:
    """A tiny line of values in [0, 1], oldest first, for a table cell (no axes, no text); a
    missing value breaks the line, and the last value is a dot coloured by whether it is 1."""
    if not values:
        return ""
    step = (width - 4) / max(len(values) - 1, 1)

    def at(i: int, v: float) -> tuple[float, float]:
        return (2 + i * step, 2 + (1 - v) * (height - 4))

    parts = [
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="share of checks passed, last {len(values)} runs">'
    ]
    segment: list[str] = []
    for i, v in enumerate([*values, None]):
        if v is None:
            if len(segment) > 1:
                parts.append(
                    f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{" ".join(segment)}"/>'
                )
            segment = []
            continue
        x, y = at(i, v)
        segment.append(f"{x:.1f},{y:.1f}")
    last = values[-1]
    if last is not None:
        x, y = at(len(values) - 1, last)
        colour = "#1b7f3b" if last >= 1.0 else "#b00020"
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"/>')
    parts.append("</svg>")
    return "".join(parts)


def grid_svg(charts: Sequence[str], *, columns: int = 3, width: int = 420, height: int = 190) -> str:
    """Several chart SVGs tiled into one ``<svg>`` (for places that take a single image); a row
    is as tall as its tallest chart, so wrapped legends never run into the next row."""
    heights = [_svg_height(svg, height) for svg in charts]
    row_heights = [max(heights[i : i + columns], default=height) for i in range(0, len(charts), columns)] or [
        height
    ]
    tops = [sum(row_heights[:r]) for r in range(len(row_heights))]
    tiles = [
        f'<g transform="translate({(i % columns) * width},{tops[i // columns]})">{svg}</g>'
        for i, svg in enumerate(charts)
    ]
    total = sum(row_heights)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{columns * width}" height="{total}" '
        f'viewBox="0 0 {columns * width} {total}">{"".join(tiles)}</svg>'
    )


def _svg_height(svg: str, default: int) -> int:
    match = re.search(r'height="(\d+)"', svg)
    return int(match.group(1)) if match else default


def _segments(points: Sequence[Point]) -> list[list[tuple[datetime, float]]]:
    """Runs of consecutive computable values: a null value (not computable) breaks the line."""
    segments: list[list[tuple[datetime, float]]] = [[]]
    for t, v in points:
        if v is None:
            segments.append([])
        else:
            segments[-1].append((t, v))
    return [s for s in segments if s]


def _y_range(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if low >= 0.0 and high <= 1.0:  # a rate: always the whole scale, so moves are not exaggerated
        return 0.0, 1.0
    if low == high:
        return low - 1.0, high + 1.0
    return low, high
