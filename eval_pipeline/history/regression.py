"""The regression check: did a metric fall below the previous run of its series by more than noise?

Pure function of the history root and the current run's tables; the Dagster metrics asset
calls :func:`find_regressions` and reports the findings as a WARN check.

Noise, by default, is derived from a Wilson interval (95%) on the *previous* run's
numerator and denominator: a higher-is-better rate regresses when the current value falls
below the interval's lower bound, so the allowed drop is ``previous - wilson_low``
(``wilson_high - previous`` for a lower-is-better rate such as ``error_rate``). On 15 cases at
1.0 the allowed drop is 0.204: one case flipping (0.933) is noise; nine flipping (0.4) is not.
A fixed allowed drop per metric (``RegressionPolicy.noise``) overrides the interval. Metrics
without a denominator (counts) and metrics whose current or previous value is null are
reported, never flagged.

The previous run is the latest *committed* run of the same series (lane, split, runtime,
case set): a ``--cases`` run (case set ``custom-<hash>``) is never compared with the nightly
series, nor the other way round. When the series' case files changed between the two runs
(``cases_sha256`` differs), the metrics are **not comparable** (a rate over other cases says
nothing about a behaviour change): no finding is flagged, each note says "case set changed",
and ``flipped_case_ids`` lists the pass→fail flips on the cases both runs share, so a real
regression on unchanged cases is still in sight. The next run compares normally again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import duckdb
import pandas as pd

from eval_pipeline.history.runs import RUN_MATCH, RunRef, is_missing, ref_from_row
from eval_pipeline.history.views import connect
from eval_pipeline.intervals import Z_95, wilson_interval

FINDING_COLUMNS = [
    "metric",
    "value",
    "previous_value",
    "previous_run_id",
    "delta",
    "allowed_noise",
    "regressed",
    "flipped_case_ids",
    "note",
]


@dataclass(frozen=True)
class RegressionPolicy:
    """How much a metric may move between two runs before it is called a regression."""

    z: float = Z_95
    # metric → allowed absolute move in the bad direction; overrides the Wilson interval.
    noise: Mapping[str, float] = field(default_factory=dict)
    # Metrics without a threshold that says otherwise, for which lower is better.
    lower_is_better: frozenset[str] = frozenset({"error_rate"})


@dataclass(frozen=True)
class MetricFinding:
    """One metric of the current run against the previous run of the same series."""

    metric: str
    value: float | None
    previous_value: float | None
    previous_run_id: str | None
    delta: float | None  # value - previous_value
    allowed_noise: float | None
    regressed: bool
    flipped_case_ids: tuple[str, ...]  # pass→fail on the metric's predicate (all predicates if none matches)
    note: str


def find_regressions(
    root: str,
    *,
    lane: str,
    split: str,
    runtime: str,
    case_set: str,
    metrics: pd.DataFrame,
    case_predicates: pd.DataFrame,
    run_id: str | None = None,
    policy: RegressionPolicy | None = None,
) -> list[MetricFinding]:
    """Per-metric findings for the current run (its ``metrics`` and ``case_predicates`` tables;
    only the failing rows of ``case_predicates`` matter, and a big run passes only those).

    The previous run is the latest committed run of the series (lane, split, runtime,
    case_set) other than ``run_id`` (default: the ``run_id`` column of ``metrics``, if any)
    that started before the current run (when ``metrics`` has ``started_at``). With no
    previous run every finding says so.
    """
    policy = policy or RegressionPolicy()
    stored_run_id = _single(metrics, "run_id")
    run_id = run_id or (None if stored_run_id is None else str(stored_run_id))
    series = (lane, split, runtime, case_set)
    with connect(root) as con:
        previous = _previous_run(con, series, run_id, _single(metrics, "started_at"))
        if previous is None:
            previous_metrics = pd.DataFrame(columns=["metric", "value", "numerator", "denominator"])
            previous_cases = pd.DataFrame(columns=["case_id", "predicate", "passed"])
        else:
            previous_metrics = con.execute(
                f"SELECT metric, value, numerator, denominator FROM metrics WHERE {RUN_MATCH}",
                previous.params(),
            ).df()
            # Only the previous verdicts of what fails now: a big run's table stays in DuckDB.
            failing_now = case_predicates.loc[
                case_predicates["passed"].eq(False).fillna(False), ["case_id", "predicate"]
            ].astype(str)
            con.register("failing_now", failing_now)
            previous_cases = con.execute(
                "SELECT c.case_id, c.predicate, c.passed FROM case_predicates c "
                "JOIN failing_now f ON c.case_id = f.case_id AND c.predicate = f.predicate "
                f"WHERE {RUN_MATCH}",  # its columns are case_predicates' alone
                previous.params(),
            ).df()
            con.unregister("failing_now")
    flips = pass_to_fail(previous_cases, case_predicates)
    before = {str(row["metric"]): row for _, row in previous_metrics.iterrows()}
    current_sha = _single(metrics, "cases_sha256")
    if (
        previous is not None
        and not is_missing(current_sha)
        and previous.cases_sha256 not in (None, current_sha)
    ):
        return [
            _case_set_changed(row, before.get(str(row["metric"])), previous, flips)
            for _, row in metrics.iterrows()
        ]
    return [
        _finding(row, before.get(str(row["metric"])), previous, flips, policy)
        for _, row in metrics.iterrows()
    ]


def findings_frame(findings: list[MetricFinding]) -> pd.DataFrame:
    rows = [{name: getattr(f, name) for name in FINDING_COLUMNS} for f in findings]
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


def pass_to_fail(previous: pd.DataFrame, current: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """Predicate → sorted case ids that passed in ``previous`` and fail in ``current``."""
    if previous.empty or current.empty:
        return {}
    joined = previous[["case_id", "predicate", "passed"]].merge(
        current[["case_id", "predicate", "passed"]], on=["case_id", "predicate"], suffixes=("_before", "_now")
    )
    passed_before = joined["passed_before"].astype("boolean").fillna(False)
    failed_now = ~joined["passed_now"].astype("boolean").fillna(True)
    flipped = joined[passed_before & failed_now]
    return {
        str(predicate): tuple(sorted(set(group["case_id"].astype(str))))
        for predicate, group in flipped.groupby("predicate")
    }


def metric_predicate(metric: str) -> str:
    """The predicate a rate metric counts: ``no_placeholder_rate`` → ``no_placeholder``."""
    for suffix in ("_pass_rate", "_rate"):
        if metric.endswith(suffix):
            return metric[: -len(suffix)]
    return metric


def _case_set_changed(
    row: pd.Series, before: pd.Series | None, previous: RunRef, flips: dict[str, tuple[str, ...]]
) -> MetricFinding:
    """A finding when the series' case files changed: reported, not compared (module docstring)."""
    metric = str(row["metric"])
    flipped = _flipped_for(metric, flips)
    note = (
        f"case set changed since {previous.run_id} (case files differ): not comparable; "
        f"{len(flipped)} case(s) went pass→fail among the common cases"
    )
    previous_value = None if before is None else _number(before["value"])
    return MetricFinding(
        metric, _number(row.get("value")), previous_value, previous.run_id, None, None, False, flipped, note
    )


def _flipped_for(metric: str, flips: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    return flips.get(metric_predicate(metric)) or tuple(sorted({c for ids in flips.values() for c in ids}))


def _finding(
    row: pd.Series,
    before: pd.Series | None,
    previous: RunRef | None,
    flips: dict[str, tuple[str, ...]],
    policy: RegressionPolicy,
) -> MetricFinding:
    metric = str(row["metric"])
    value = _number(row.get("value"))
    flipped = _flipped_for(metric, flips)
    if previous is None or before is None:
        note = "no previous run of this series" if previous is None else "new metric"
        return MetricFinding(
            metric, value, None, previous.run_id if previous else None, None, None, False, (), note
        )
    previous_value = _number(before["value"])
    delta = None if value is None or previous_value is None else value - previous_value
    common = (metric, value, previous_value, previous.run_id, delta)
    if value is None or previous_value is None or delta is None:
        return MetricFinding(*common, None, False, flipped, "not comparable: a value is null")
    lower_better = _lower_is_better(row, metric, policy)
    noise = _allowed_noise(metric, previous_value, before, lower_better, policy)
    if noise is None:
        return MetricFinding(*common, None, False, flipped, "a count, not a rate: reported, not checked")
    worse_by = delta if lower_better else -delta
    regressed = worse_by > noise + 1e-12
    direction = "rose" if lower_better else "fell"
    note = (
        f"{direction} {worse_by:.3f} vs {previous.run_id}, beyond noise {noise:.3f}"
        if regressed
        else f"moved {delta:+.3f} vs {previous.run_id}, within noise {noise:.3f}"
    )
    return MetricFinding(*common, noise, regressed, flipped if regressed else (), note)


def _allowed_noise(
    metric: str, previous_value: float, before: pd.Series, lower_better: bool, policy: RegressionPolicy
) -> float | None:
    if metric in policy.noise:
        return float(policy.noise[metric])
    numerator, denominator = _number(before["numerator"]), _number(before["denominator"])
    if numerator is None or not denominator:
        return None
    low, high = wilson_interval(numerator, denominator, policy.z) or (previous_value, previous_value)
    return high - previous_value if lower_better else previous_value - low


def _lower_is_better(row: pd.Series, metric: str, policy: RegressionPolicy) -> bool:
    op = row.get("threshold_op")
    if isinstance(op, str) and op in ("<", "<="):
        return True
    if isinstance(op, str) and op in (">", ">="):
        return False
    if isinstance(op, str) and op == "==" and not is_missing(row.get("threshold")):
        return float(row["threshold"]) == 0.0  # "== 0" (false_certainty_rate, error_rate): lower is better
    return metric in policy.lower_is_better


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
