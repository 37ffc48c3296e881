"""Flaky cases and noisy rates over the last N runs of each series (lane, split, runtime, case set).

A *flip* is a change of a case predicate's verdict between two consecutive runs of the same
series in which it had a verdict (null verdicts, not applicable, are skipped): the one
definition in :mod:`eval_pipeline.metrics.flips`, which also counts flips between a run's samples.
Across runs, each run's verdict of the case predicate (:mod:`eval_pipeline.history.verdicts`:
pass when every sample passed) stands for it. A case predicate's flip rate is flips /
transitions, null when it had fewer than two verdicts. **Flaky** is alternation: a flip that
undoes the one before (pass→fail→pass); a case that went pass→fail once and stayed has one
flip and no alternation: a regression, not flakiness (``first-failure`` reports it).

Lane rates come with a Wilson interval on the latest run's numerator and denominator: a move
that stays inside it (a 2-point move on 15 cases does) is noise, not a regression.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from eval_pipeline.core import SERIES_SQL
from eval_pipeline.history.verdicts import CASE_VERDICTS
from eval_pipeline.metrics import Z_95, count_flips, wilson_interval

SERIES = ["lane", "split", "runtime", "case_set"]

CASE_FLIP_COLUMNS = [
    "lane",
    "split",
    "runtime",
    "case_set",
    "case_id",
    "predicate",
    "verdicts",
    "transitions",
    "flips",
    "alternations",
    "flip_rate",
    "last_passed",
]
RATE_INTERVAL_COLUMNS = [
    "lane",
    "split",
    "runtime",
    "case_set",
    "metric",
    "runs",
    "value",
    "numerator",
    "denominator",
    "wilson_low",
    "wilson_high",
    "previous_value",
    "previous_within_interval",
    "window_min",
    "window_max",
]

_WINDOW = f"""
    window_runs AS (
        SELECT run_id, {SERIES_SQL}, seq FROM run_order
        WHERE (? IS NULL OR lane = ?)
        QUALIFY seq > max(seq) OVER (PARTITION BY {SERIES_SQL}) - ?)
"""


def case_flip_rates(
    con: duckdb.DuckDBPyConnection, *, lane: str | None = None, last: int = 10
) -> pd.DataFrame:
    """Flip rate of every case predicate over the last ``last`` runs, flakiest first."""
    _check_last(last)
    rows = con.execute(
        f"""
        WITH {_WINDOW}
        SELECT {SERIES_SQL}, case_id, predicate,
               list(passed ORDER BY w.seq) AS sequence,
               arg_max(passed, w.seq) FILTER (WHERE passed IS NOT NULL) AS last_passed
        FROM ({CASE_VERDICTS.format(source="case_predicates")}) v JOIN window_runs w USING (run_id, {SERIES_SQL})
        GROUP BY {SERIES_SQL}, case_id, predicate
        HAVING count(passed) > 0
        """,
        [lane, lane, last],
    ).df()
    # One definition of a flip (eval_pipeline.metrics.flips), the same as within a run's samples.
    counted = [count_flips(sequence) for sequence in rows["sequence"]]
    rows["verdicts"] = [c.verdicts for c in counted]
    rows["transitions"] = [c.transitions for c in counted]
    rows["flips"] = [c.flips for c in counted]
    rows["alternations"] = [c.alternations for c in counted]
    rows["flip_rate"] = pd.array([c.flip_rate for c in counted], dtype="Float64")
    ordered = rows.sort_values(
        ["alternations", "flip_rate", *SERIES, "case_id", "predicate"],
        ascending=[False, False, *([True] * (len(SERIES) + 2))],
        na_position="last",
        kind="stable",
    )
    return ordered.reset_index(drop=True)[CASE_FLIP_COLUMNS]


def rate_intervals(
    con: duckdb.DuckDBPyConnection, *, lane: str | None = None, last: int = 10, z: float = Z_95
) -> pd.DataFrame:
    """Each rate metric of each series: latest value with its Wilson interval, and the window's range.

    ``previous_within_interval`` says whether the run before the latest lies inside the
    latest run's interval (null when there is no previous value).
    """
    _check_last(last)
    rows = con.execute(
        f"""
        WITH {_WINDOW},
        series AS (
            SELECT {SERIES_SQL}, metric, w.seq, value, numerator, denominator
            FROM metrics JOIN window_runs w USING (run_id, {SERIES_SQL})
            WHERE denominator IS NOT NULL)
        SELECT {SERIES_SQL}, metric,
               count(*) AS runs,
               arg_max(value, seq) AS value,
               arg_max(numerator, seq) AS numerator,
               arg_max(denominator, seq) AS denominator,
               list(value ORDER BY seq DESC)[2] AS previous_value,
               min(value) AS window_min,
               max(value) AS window_max
        FROM series
        GROUP BY {SERIES_SQL}, metric
        ORDER BY {SERIES_SQL}, metric
        """,
        [lane, lane, last],
    ).df()
    bounds = [
        _interval(numerator, denominator, z)
        for numerator, denominator in zip(rows["numerator"], rows["denominator"], strict=True)
    ]
    rows["wilson_low"] = pd.array([b[0] if b else None for b in bounds], dtype="Float64")
    rows["wilson_high"] = pd.array([b[1] if b else None for b in bounds], dtype="Float64")
    rows["previous_within_interval"] = pd.array(
        [
            None if pd.isna(prev) or b is None else bool(b[0] <= prev <= b[1])
            for prev, b in zip(rows["previous_value"], bounds, strict=True)
        ],
        dtype="boolean",
    )
    return rows[RATE_INTERVAL_COLUMNS]


def _interval(numerator: float, denominator: float, z: float) -> tuple[float, float] | None:
    if pd.isna(numerator) or pd.isna(denominator):
        return None
    return wilson_interval(float(numerator), float(denominator), z)


def _check_last(last: int) -> None:
    if last < 2:
        raise ValueError(f"--last must be at least 2 (a flip needs two runs), got {last}")
