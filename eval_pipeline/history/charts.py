"""The lane trend charts: every metric of a lane over its runs, a line per series, with its
threshold. The viewer's pages and the static report (:mod:`eval_pipeline.viewer.export`)
show them, and so does the Dagster asset metadata (:func:`lane_chart_markdown`).
"""

from __future__ import annotations

import base64
import math
from contextlib import nullcontext
from itertools import groupby
from operator import itemgetter

import duckdb

from eval_pipeline.history.svg import Chart, Point, grid_svg, trend_svg
from eval_pipeline.history.views import connect


def lane_charts(con: duckdb.DuckDBPyConnection, lane: str) -> list[str]:
    """One SVG trend chart per metric of ``lane``; a line per series (see :func:`series_name`)."""
    rows = con.execute(
        "SELECT metric, split, runtime, case_set, coalesce(started_at, date::TIMESTAMPTZ) AS run_at, value, "
        "threshold_op, threshold FROM metrics WHERE lane = ? ORDER BY metric, split, runtime, case_set, run_at",
        [lane],
    ).fetchall()
    charts = []
    for metric, of_metric in groupby(rows, key=itemgetter(0)):  # ordered by metric, then series
        by_metric = list(of_metric)
        series: dict[str, list[Point]] = {
            series_name(str(split), str(runtime), str(case_set)): [
                (row[4], None if row[5] is None or math.isnan(row[5]) else float(row[5])) for row in points
            ]
            for (split, runtime, case_set), points in groupby(by_metric, key=itemgetter(1, 2, 3))
        }
        *_, threshold_op, threshold = by_metric[-1]
        threshold = None if threshold is None or math.isnan(threshold) else float(threshold)
        label = f"{threshold_op} {threshold:g}" if threshold is not None else ""
        charts.append(trend_svg(Chart(str(metric), series, threshold, label)))
    return charts


def series_name(split: str, runtime: str, case_set: str) -> str:
    """A series within a lane: ``split · runtime``, plus the case set when not the split's own."""
    return f"{split} · {runtime}" + ("" if case_set == split else f" · {case_set}")


def lane_chart_svg(history: str | duckdb.DuckDBPyConnection, lane: str) -> str:
    """Every metric chart of ``lane`` tiled into one SVG (for Dagster asset metadata);
    ``history`` is the history root, or an open connection to it (:func:`connect`)."""
    with connect(history) if isinstance(history, str) else nullcontext(history) as con:
        return grid_svg(lane_charts(con, lane))


def lane_chart_markdown(history: str | duckdb.DuckDBPyConnection, lane: str) -> str:
    """The lane's chart as markdown: an image with an inline ``data:`` URI (no file, no server)."""
    encoded = base64.b64encode(lane_chart_svg(history, lane).encode()).decode()
    return f"![{lane} metrics over time](data:image/svg+xml;base64,{encoded})"
