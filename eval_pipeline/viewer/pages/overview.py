"""A lane's overview (the report's section for it): its series' latest runs side by side, their
checks, their ``no_regression`` findings against the run before, failing and flaky cases, the
trend charts, what flipped."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from eval_pipeline.history.charts import lane_charts
from eval_pipeline.history.diff import RunDiff, latest_diff
from eval_pipeline.history.regression import MetricFinding, find_regressions, regression_sentence
from eval_pipeline.history.runs import RUN_MATCH, RunRef, latest_runs, ref_from_row
from eval_pipeline.lanes import declared_lane, lane_kind
from eval_pipeline.metrics import ALPHA
from eval_pipeline.viewer.pages.common import (
    NotFound,
)
from eval_pipeline.viewer.pages.runs import (
    Check,
    FailingRow,
    Flaky,
    checks_of,
    failing_of,
    flaky_of,
    run_size,
)

REPORT_ROWS = 200  # failing cases (and flaky ones) a lane overview lists per series


@dataclass(frozen=True)
class SideBySide:
    """Metric rows × the lane's series (their latest runs): (value, verdict word) or None."""

    runs: list[RunRef]
    rows: list[tuple[str, list[tuple[float | None, str] | None]]]


@dataclass(frozen=True)
class Regression:
    """A run's ``no_regression`` findings, as the check decides them, against the run before it
    in its series: the tested metrics (and any that regressed untested), and the check's sentence."""

    previous_run_id: str
    findings: list[MetricFinding]
    sentence: str

    @property
    def word(self) -> str:
        return "warn" if any(f.regressed for f in self.findings) else "pass"


@dataclass(frozen=True)
class LatestRun:
    """A series' latest run on a lane overview: its checks, failing cases, cases flaky within it
    (``samples`` > 1 only), and what flipped since the run before (None: it is the only run)."""

    ref: RunRef
    checks: list[Check]
    failing: list[FailingRow]
    failing_results: int
    failing_cases: int
    samples: int
    flaky: Flaky
    diff: RunDiff | None
    regression: Regression | None  # None: the series' first run


@dataclass(frozen=True)
class LaneReport:
    lane: str
    side_by_side: SideBySide
    latest: list[LatestRun]
    charts: list[str]
    grid_splits: list[str]  # the splits whose own cases ran: each has a grid


def lane_reports(con: duckdb.DuckDBPyConnection, lane: str | None = None) -> list[LaneReport]:
    """Per lane (or only ``lane``), the latest run of each series side by side, each one's checks,
    failing cases and flaky cases, the trend charts (a line per series), what flipped."""
    lanes = [str(row[0]) for row in con.execute("SELECT DISTINCT lane FROM runs ORDER BY lane").fetchall()]
    if lane is not None:
        if lane not in lanes:
            raise NotFound(f"no lane {lane!r} in history; lanes with runs: {', '.join(lanes) or 'none'}")
        lanes = [lane]
    reports = []
    for name in lanes:
        refs = [ref_from_row(row) for _, row in latest_runs(con, lane=name, last=1).iterrows()]
        latest = []
        for ref in refs:
            _, samples = run_size(con, ref)
            failing = failing_of(con, ref, samples=samples, limit=REPORT_ROWS)
            latest.append(
                LatestRun(
                    ref,
                    [c for c in checks_of(con, ref) if c.threshold is not None],
                    failing.rows,
                    failing.results,
                    failing.cases,
                    samples,
                    flaky_of(con, ref, samples=samples, limit=REPORT_ROWS),
                    latest_diff(con, ref.series),
                    regression_of(con, ref),
                )
            )
        own = sorted({ref.split for ref in refs if ref.case_set == ref.split})
        reports.append(LaneReport(name, _side_by_side(con, refs), latest, lane_charts(con, name), own))
    return reports


def regression_of(con: duckdb.DuckDBPyConnection, ref: RunRef) -> Regression | None:
    """The run's ``no_regression`` findings (:func:`eval_pipeline.history.regression.find_regressions`,
    the check's own decision) against the run before it, or None for a series' first run."""
    spec = declared_lane(ref.lane)
    metrics = con.execute(f"SELECT * FROM metrics WHERE {RUN_MATCH}", ref.params()).df()
    predicates = con.execute(
        f"SELECT case_id, predicate, passed, severity, sample_index FROM case_predicates WHERE {RUN_MATCH}",
        ref.params(),
    ).df()
    turn_verdicts, transcripts = (
        con.execute(f"SELECT {columns} FROM {table} WHERE {RUN_MATCH}", ref.params()).df()
        for table, columns in (
            ("turn_verdicts", "case_id, sample_index, turn_index, predicate, passed"),
            ("transcripts", "case_id, sample_index, turn_index, error"),
        )
    )
    findings = find_regressions(
        con,
        series=ref.series,
        metrics=metrics,
        case_predicates=predicates,
        metric_rows=lane_kind(spec).metric_rows if spec else {},
        turn_verdicts=turn_verdicts,
        transcripts=transcripts,
        alpha=spec.regression_alpha if spec else ALPHA,
    )
    previous = next((f.previous_run_id for f in findings if f.previous_run_id), None)
    if previous is None:
        return None
    shown = [f for f in findings if f.cases is not None or f.regressed]
    return Regression(previous, shown, regression_sentence(findings))


def _side_by_side(con: duckdb.DuckDBPyConnection, runs: list[RunRef]) -> SideBySide:
    values: dict[tuple[int, str], tuple[float | None, str]] = {}
    for index, ref in enumerate(runs):
        for check in checks_of(con, ref):
            values[(index, check.metric)] = (check.value, check.verdict)
    metrics = sorted({metric for _, metric in values})
    return SideBySide(runs, [(m, [values.get((i, m)) for i in range(len(runs))]) for m in metrics])
