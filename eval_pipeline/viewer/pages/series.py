"""The home page (every series) and a series' page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import pandas as pd

from eval_pipeline.core import SERIES_COLUMN_NAMES, SERIES_MATCH, SERIES_SQL, Series
from eval_pipeline.history.runs import RunRef, is_missing, ref_from_row
from eval_pipeline.history.svg import Chart, Point, trend_svg
from eval_pipeline.viewer.pages.common import (
    NotFound,
)

SPARK_RUNS = 20  # runs a sparkline on the series list spans


@dataclass(frozen=True)
class SeriesRow:
    """One series on the home page: its latest run, that run's verdict, its recent runs' shares
    of checks passed (oldest first; None: a run with no check)."""

    series: Series
    latest: RunRef
    verdict: str
    runs: int
    passed_shares: list[float | None]


@dataclass(frozen=True)
class Home:
    series: list[SeriesRow]
    lanes: list[tuple[str, list[str]]]  # each lane with runs, and its splits


@dataclass(frozen=True)
class RunSummary:
    """One run of a series, as its series page lists it."""

    ref: RunRef
    started_at: datetime | None
    verdict: str
    blocking_failures: int
    warnings: int


@dataclass(frozen=True)
class SeriesPage:
    series: Series
    charts: list[str]  # one SVG per metric with a value, the checked ones first, the threshold drawn
    runs: list[RunSummary]  # newest first


def home(con: duckdb.DuckDBPyConnection) -> Home:
    """Every series with its latest run, that run's verdict and a sparkline of its recent runs."""
    recent = con.execute(
        f"""
        WITH r AS (SELECT * FROM runs QUALIFY seq > max(seq) OVER (PARTITION BY {SERIES_SQL}) - ?),
             c AS (SELECT run_id, {SERIES_SQL}, count(*) FILTER (WHERE passed IS NOT NULL) AS checks,
                          count(*) FILTER (WHERE passed) AS passed
                   FROM metrics GROUP BY ALL)
        SELECT r.*, c.checks, c.passed,
               max(r.seq) OVER (PARTITION BY {", ".join(f"r.{c}" for c in SERIES_COLUMN_NAMES)}) AS total
        FROM r LEFT JOIN c USING (run_id, {SERIES_SQL})
        ORDER BY {SERIES_SQL}, seq
        """,
        [SPARK_RUNS],
    ).df()
    rows: list[SeriesRow] = []
    for _, runs in recent.groupby(list(SERIES_COLUMN_NAMES), sort=True):
        last = runs.iloc[-1]
        shares = [
            None if is_missing(checks) or not checks else float(passed) / float(checks)
            for checks, passed in zip(runs["checks"], runs["passed"], strict=True)
        ]
        ref = ref_from_row(last)
        rows.append(
            SeriesRow(
                ref.series,
                ref,
                str(last["verdict"]),
                int(last["total"]),
                shares,
            )
        )
    lanes: dict[str, set[str]] = {}
    for row in rows:
        lanes.setdefault(row.series.lane, set()).add(row.series.split)
    return Home(rows, [(lane, sorted(splits)) for lane, splits in sorted(lanes.items())])


def series_page(con: duckdb.DuckDBPyConnection, series: Series) -> SeriesPage:
    """One series: a chart per metric over its runs (threshold drawn; checked metrics first, none
    for a metric with no value in any run), and its runs, newest first."""
    runs = con.execute(
        f"SELECT * FROM runs WHERE {SERIES_MATCH} ORDER BY seq DESC",
        series.params(),
    ).df()
    if runs.empty:
        raise NotFound(
            f"no series lane {series.lane!r}, split {series.split!r}, runtime {series.runtime!r}, "
            f"case set {series.case_set!r} in history"
        )
    points = con.execute(
        "SELECT metric, coalesce(started_at, date::TIMESTAMPTZ) AS run_at, value, threshold_op, threshold "
        f"FROM metrics WHERE {SERIES_MATCH} ORDER BY metric, run_at",
        series.params(),
    ).df()
    charts = []
    # Checked metrics first (what decides the verdict), then the rest, each by name; a metric
    # with no value in any run (tokens a runtime never reported) draws an empty chart: left out.
    measured = [
        (str(metric), rows)
        for metric, rows in points.groupby("metric", sort=True)
        if rows["value"].notna().any()
    ]
    for metric, rows in sorted(measured, key=lambda item: is_missing(item[1]["threshold"].iloc[-1])):
        line: list[Point] = [
            (pd.Timestamp(at).to_pydatetime(), None if is_missing(v) else float(v))
            for at, v in zip(rows["run_at"], rows["value"], strict=True)
        ]
        last = rows.iloc[-1]
        threshold = None if is_missing(last["threshold"]) else float(last["threshold"])
        label = f"{last['threshold_op']} {threshold:g}" if threshold is not None else ""
        charts.append(trend_svg(Chart(metric, {series.runtime: line}, threshold, label)))
    summaries = [
        RunSummary(
            ref_from_row(row),
            None if is_missing(row["started_at"]) else pd.Timestamp(row["started_at"]).to_pydatetime(),
            str(row["verdict"]),
            int(row["blocking_failures"]),
            int(row["warnings"]),
        )
        for _, row in runs.iterrows()
    ]
    return SeriesPage(series, charts, summaries)
