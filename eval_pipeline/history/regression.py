"""The regression check: is this run significantly worse than the previous run of its series?

Pure function of the history root and the current run's tables; the Dagster history asset
calls :func:`find_regressions` and reports the findings as the WARN check ``no_regression``.

The test is **paired**: this run against the latest committed run of the same series (lane,
split, runtime, case set), on the cases both evaluated, from each run's case verdicts
(:mod:`eval_pipeline.history.verdicts`) of the rows each rate counts, as the lane declares it
(:mod:`eval_pipeline.lanes.metric_rows`). A rate **regressed** when

- it is significantly worse: the one-sided exact McNemar p-value (the cases that went the bad
  way against those that went the good way) is below the lane's ``regression_alpha``
  (default 0.05); with several verdicts per case (repeats) McNemar does not apply and the
  one-sided clustered bootstrap bound decides (whole cases resampled); or
- its threshold is pinned (``== 1``, ``== 0``) and any case went the bad way.

On 15 cases, one case going pass→fail is not significant (p = 0.5) unless the rate is pinned;
nine are (p = 0.002). A rate over turns, ``error_rate`` and the counts have no case verdicts in
history: a pinned one regressed when it held its pin last time and no longer does; the others
are reported, not tested.

A ``--cases`` run (case set ``custom-<hash>``) is never compared with the nightly series, nor
the other way round. When the series' case files changed between the two runs
(``cases_sha256`` differs), nothing is flagged: each note says "case set changed" and
``flipped_case_ids`` lists the pass→fail flips on the cases both runs share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial

import duckdb
import pandas as pd

from eval_pipeline.history.comparison import common_cases, per_case_counts
from eval_pipeline.history.runs import RUN_MATCH, RunRef, is_missing, ref_from_row
from eval_pipeline.history.verdicts import RUN_KEYS, flipped, side_by_side
from eval_pipeline.history.views import connect
from eval_pipeline.lanes.metric_rows import MetricRows, higher_is_better, is_pinned
from eval_pipeline.paired import (
    ALPHA,
    bootstrap_deltas,
    mcnemar_one_sided,
    worse_bound,
)

FINDING_COLUMNS = [
    "metric",
    "value",
    "previous_value",
    "previous_run_id",
    "delta",
    "cases",
    "worse",
    "better",
    "p_value",
    "regressed",
    "flipped_case_ids",
    "note",
]
CURRENT_ROWS = "_current_case_predicates"
_CURRENT_COLUMNS = ("case_id", "predicate", "passed", "severity", "code", "sample_index")


@dataclass(frozen=True)
class MetricFinding:
    """One metric of the current run against the previous run of the same series."""

    metric: str
    value: float | None
    note: str
    previous_value: float | None = None
    previous_run_id: str | None = None
    delta: float | None = None  # value - previous_value
    cases: int | None = None  # common cases tested (None: not tested)
    worse: int | None = None  # common cases that went the bad way on this metric
    better: int | None = None  # … and the good way
    p_value: float | None = None  # one-sided: that this run is worse (None: not tested, or clustered)
    regressed: bool = False
    flipped_case_ids: tuple[str, ...] = ()  # the cases that went the bad way


def find_regressions(
    history: str | duckdb.DuckDBPyConnection,
    *,
    lane: str,
    split: str,
    runtime: str,
    case_set: str,
    metrics: pd.DataFrame,
    case_predicates: pd.DataFrame,
    metric_rows: Mapping[str, MetricRows],
    alpha: float = ALPHA,
    run_id: str | None = None,
) -> list[MetricFinding]:
    """Per-metric findings for the current run: its ``metrics`` table and its ``case_predicates``
    (at least ``case_id``, ``predicate``, ``passed``, ``severity``; ``sample_index`` with
    repeats), against the previous run of the series (module docstring).

    ``history`` is the history root, or an open connection to it (:func:`connect`).
    The previous run is the latest committed run of the series other than ``run_id`` (default:
    the ``run_id`` column of ``metrics``, if any) that started before the current run (when
    ``metrics`` has ``started_at``). With no previous run every finding says so.
    """
    stored_run_id = _single(metrics, "run_id")
    run_id = run_id or (None if stored_run_id is None else str(stored_run_id))
    series = (lane, split, runtime, case_set)
    current = RunRef(run_id or "current", lane, split, runtime, case_set)
    with connect(history) if isinstance(history, str) else nullcontext(history) as con:
        previous = _previous_run(con, series, run_id, _single(metrics, "started_at"))
        if previous is None:
            return [_first_run(row) for _, row in metrics.iterrows()]
        before = {
            str(row["metric"]): row
            for _, row in con.execute(
                f"SELECT metric, value FROM metrics WHERE {RUN_MATCH}", previous.params()
            )
            .df()
            .iterrows()
        }
        rows = case_predicates.reindex(columns=list(_CURRENT_COLUMNS))  # a column not read: null
        con.register(
            CURRENT_ROWS, rows.assign(**dict(zip(RUN_KEYS.split(", "), current.params(), strict=True)))
        )
        try:
            sides = side_by_side(con, previous, current, source_b=CURRENT_ROWS)
        finally:
            con.unregister(CURRENT_ROWS)
    current_sha = _single(metrics, "cases_sha256")
    if not is_missing(current_sha) and previous.cases_sha256 not in (None, current_sha):
        went_bad = flipped(sides, common_cases_only=True)
        went_bad = went_bad[went_bad["passed_a"].eq(True) & went_bad["passed_b"].eq(False)]
        ids = tuple(sorted(set(went_bad["case_id"].astype(str))))
        return [
            _case_set_changed(row, before.get(str(row["metric"])), previous, ids)
            for _, row in metrics.iterrows()
        ]
    common = common_cases(sides)
    return [
        _finding(
            row, before.get(str(row["metric"])), previous, common, metric_rows.get(str(row["metric"])), alpha
        )
        for _, row in metrics.iterrows()
    ]


def findings_frame(findings: list[MetricFinding]) -> pd.DataFrame:
    rows = [{name: getattr(f, name) for name in FINDING_COLUMNS} for f in findings]
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


def regression_sentence(findings: Sequence[MetricFinding]) -> str:
    """``2 metric(s) regressed vs 71afd00d: a (9 worse, 0 better of 15, p = 0.001953), b (…)``:
    what the check's description says (the CLI prints it), and the report."""
    regressed = [f for f in findings if f.regressed]
    if not regressed:
        return "no metric regressed"
    what = ", ".join(
        f"{f.metric} ({f.worse} worse, {f.better} better of {f.cases}"
        + ("" if f.p_value is None else f", p = {f.p_value:.4g}")
        + ")"
        if f.cases is not None
        else f"{f.metric} ({f.note})"
        for f in regressed
    )
    previous = str(regressed[0].previous_run_id)[:8]  # the prefix tables show; metadata has it whole
    return f"{len(regressed)} metric(s) regressed vs {previous}: {what}"


def _first_run(row: pd.Series) -> MetricFinding:
    return MetricFinding(str(row["metric"]), _number(row.get("value")), "no previous run of this series")


def _case_set_changed(
    row: pd.Series, before: pd.Series | None, previous: RunRef, went_bad: tuple[str, ...]
) -> MetricFinding:
    """A finding when the series' case files changed: reported, not compared (module docstring)."""
    note = (
        f"case set changed since {previous.run_id} (case files differ): not comparable; "
        f"{len(went_bad)} case(s) went pass→fail among the common cases"
    )
    return MetricFinding(
        str(row["metric"]),
        _number(row.get("value")),
        note,
        previous_value=None if before is None else _number(before["value"]),
        previous_run_id=previous.run_id,
        flipped_case_ids=went_bad,
    )


def _finding(
    row: pd.Series,
    before: pd.Series | None,
    previous: RunRef,
    common: pd.DataFrame,
    rows: MetricRows | None,
    alpha: float,
) -> MetricFinding:
    metric, value = str(row["metric"]), _number(row.get("value"))
    if before is None:
        return MetricFinding(metric, value, "new metric", previous_run_id=previous.run_id)
    previous_value = _number(before["value"])
    delta = None if value is None or previous_value is None else value - previous_value
    found = partial(
        MetricFinding,
        metric,
        value,
        previous_value=previous_value,
        previous_run_id=previous.run_id,
        delta=delta,
    )
    op, threshold = row.get("threshold_op"), _number(row.get("threshold"))
    up, pinned = higher_is_better(rows, op, threshold), is_pinned(op, threshold)
    if rows is None or rows.over == "turns":
        if not pinned or threshold is None or value is None or previous_value is None:
            return found(
                f"not tested: {'a rate over turns' if rows is not None else 'no case verdicts in history'}"
            )
        off = threshold == previous_value and value != previous_value
        if off:
            return found(f"pinned at {threshold:g}: held it in {previous.run_id}, not now", regressed=True)
        return found(f"pinned at {threshold:g}: {previous_value:g} in {previous.run_id}, {value:g} now")
    counts = per_case_counts(common, rows).applicable_on_both()
    if not len(counts.case_ids):
        return found("not tested: no common case has a verdict", cases=0, worse=0, better=0)
    worse_ids, better = counts.went_worse(up), len(counts.went_worse(not up))
    if counts.one_verdict_each:
        p: float | None = mcnemar_one_sided(len(worse_ids), better)
        significant = p is not None and p < alpha
        how = f"one-sided exact McNemar p = {p:.4g}"
    else:
        p = None
        bound = worse_bound(bootstrap_deltas(*counts.arrays()), higher_is_better=up, alpha=alpha)
        significant = bound < 0 if up else bound > 0
        how = f"clustered bootstrap: {1 - alpha:.0%} bound of the change {bound:+.3f}"
    regressed = significant or (pinned and bool(worse_ids))
    why = (
        "significantly worse"
        if significant
        else f"pinned at {threshold:g} and {len(worse_ids)} case(s) went the bad way"
        if regressed
        else "not significantly worse"
    )
    n = len(counts.case_ids)
    return found(
        f"{why} vs {previous.run_id} ({len(worse_ids)} worse, {better} better of {n}; {how}, α = {alpha:g})",
        cases=n,
        worse=len(worse_ids),
        better=better,
        p_value=p,
        regressed=regressed,
        flipped_case_ids=tuple(worse_ids),
    )


def _previous_run(
    con: duckdb.DuckDBPyConnection,
    series: tuple[str, str, str, str],
    run_id: str | None,
    started_at: object,
) -> RunRef | None:
    started = None if is_missing(started_at) else pd.Timestamp(str(started_at))
    rows = con.execute(
        "SELECT * FROM runs WHERE lane = ? AND split = ? AND runtime = ? AND case_set = ? "
        "AND (? IS NULL OR run_id <> ?) AND (?::TIMESTAMPTZ IS NULL OR started_at < ?::TIMESTAMPTZ) "
        "ORDER BY seq DESC LIMIT 1",
        [*series, run_id, run_id, started, started],
    ).df()
    return None if rows.empty else ref_from_row(rows.iloc[0])


def _single(df: pd.DataFrame, column: str) -> object:
    if column not in df.columns or df.empty:
        return None
    values = df[column].dropna().unique()
    if len(values) > 1:
        raise ValueError(f"the current run's metrics hold several {column} values: {list(values)[:3]}")
    return values[0] if len(values) else None


def _number(value: object) -> float | None:
    if is_missing(value):
        return None
    return float(value)  # type: ignore[arg-type]
