"""What changed between two runs: metric deltas and flipped case predicates.

Two runs of different case sets (another ``case_set``, or the same one whose files changed:
a different ``cases_sha256``) are compared on their common cases only: flips are listed for
cases both runs evaluated, metric deltas are left null (each run's metrics cover its own
cases, so their difference would mix a case-set change with a behaviour change), and the
diff's ``note`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import duckdb
import pandas as pd

from eval_pipeline.core import Series
from eval_pipeline.history.runs import RUN_MATCH, RunRef, find_runs, latest_runs, ref_from_row
from eval_pipeline.history.verdicts import flip_rows, side_by_side

METRIC_SIDE_COLUMNS = [
    "metric",
    "value_a",
    "numerator_a",
    "denominator_a",
    "passed_a",
    "value_b",
    "numerator_b",
    "denominator_b",
    "passed_b",
    "delta",
    "threshold_op",
    "threshold",
    "severity",
]
METRIC_DELTA_COLUMNS = ["metric", "value_a", "value_b", "delta", "denominator_a", "denominator_b"]


@dataclass(frozen=True)
class RunDiff:
    """Run ``a`` (before) against run ``b`` (after)."""

    a: RunRef
    b: RunRef
    metric_deltas: pd.DataFrame  # METRIC_DELTA_COLUMNS; delta = value_b - value_a
    flips: pd.DataFrame  # verdicts.FLIP_COLUMNS, pass→fail first
    note: str | None = None  # set when the runs' case sets differ (see the module docstring)


@dataclass(frozen=True)
class CaseOverlap:
    """How the cases of two runs relate."""

    same: bool  # same case set and same case files
    cases_a: int
    cases_b: int
    common: int

    def note(self, a: RunRef, b: RunRef) -> str | None:
        if self.same:
            return None
        what = (
            f"case sets differ ({a.case_set} vs {b.case_set})"
            if a.case_set != b.case_set
            else f"case set changed ({a.case_set}: case files differ)"
        )
        return (
            f"{what}: comparing the {self.common} common cases only "
            f"({self.cases_a} vs {self.cases_b} cases); metric deltas not computed"
        )


def same_cases(a: RunRef, b: RunRef) -> bool:
    """Same case set and, when both are known, the same case files."""
    if a.case_set != b.case_set:
        return False
    return a.cases_sha256 is None or b.cases_sha256 is None or a.cases_sha256 == b.cases_sha256


def case_overlap(con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef) -> CaseOverlap:
    row = con.execute(
        f"""
        WITH a AS (SELECT DISTINCT case_id FROM case_predicates WHERE {RUN_MATCH}),
             b AS (SELECT DISTINCT case_id FROM case_predicates WHERE {RUN_MATCH})
        SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b),
               (SELECT count(*) FROM a JOIN b USING (case_id))
        """,
        [*a.params(), *b.params()],
    ).fetchall()
    cases_a, cases_b, common = row[0] if row else (0, 0, 0)
    return CaseOverlap(same_cases(a, b), int(cases_a), int(cases_b), int(common))


def metric_sides(con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef) -> pd.DataFrame:
    """Every metric of either run, each side's value, counts and verdict, ``delta = b - a``.

    The threshold columns are ``b``'s (``a``'s for a metric only ``a`` has).
    """
    return con.execute(
        f"""
        WITH a AS (SELECT * FROM metrics WHERE {RUN_MATCH}),
             b AS (SELECT * FROM metrics WHERE {RUN_MATCH})
        SELECT metric,
               a.value AS value_a, a.numerator AS numerator_a, a.denominator AS denominator_a,
               a.passed AS passed_a,
               b.value AS value_b, b.numerator AS numerator_b, b.denominator AS denominator_b,
               b.passed AS passed_b,
               b.value - a.value AS delta,
               coalesce(b.threshold_op, a.threshold_op) AS threshold_op,
               coalesce(b.threshold, a.threshold) AS threshold,
               coalesce(b.severity, a.severity) AS severity
        FROM a FULL OUTER JOIN b USING (metric)
        ORDER BY metric
        """,
        [*a.params(), *b.params()],
    ).df()[METRIC_SIDE_COLUMNS]


def metric_deltas(con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef) -> pd.DataFrame:
    """Every metric of either run with both values and ``delta = b - a`` (null if either is null)."""
    return metric_sides(con, a, b)[METRIC_DELTA_COLUMNS]


def case_flips(
    con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef, *, common_cases_only: bool = False
) -> pd.DataFrame:
    """The case predicates whose run verdict differs (:mod:`eval_pipeline.history.verdicts`:
    each once, with both runs' pass counts), with codes and the shown samples' final surfaces
    (null when the run's transcripts were not kept). With ``common_cases_only``, cases absent
    from either run are left out."""
    with side_by_side(con, a, b) as sides:
        return flip_rows(con, a, b, sides, common_cases_only=common_cases_only)


def diff_runs(con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef) -> RunDiff:
    note = None if same_cases(a, b) else case_overlap(con, a, b).note(a, b)
    flips = case_flips(con, a, b, common_cases_only=note is not None)
    deltas = metric_deltas(con, a, b)
    return RunDiff(a, b, deltas if note is None else without_deltas(deltas), flips, note)


def without_deltas(metrics: pd.DataFrame) -> pd.DataFrame:
    """``metrics`` with a null ``delta``: runs of different case sets have no meaningful one."""
    return metrics.assign(delta=pd.array([None] * len(metrics), dtype="Float64"))


def pairs_to_diff(
    con: duckdb.DuckDBPyConnection,
    run_a: str | None = None,
    run_b: str | None = None,
    *,
    lane: str | None = None,
) -> list[tuple[RunRef, RunRef]]:
    """Which runs to compare.

    No run ids: the last two runs of every series (lane, split, runtime, case set). Two run
    ids: their lane runs paired by lane and split (runtimes and case sets may differ: that
    compares runtimes). Raises KeyError for an unknown run and ValueError when the runs
    share no lane split.
    """
    if run_a is None:
        if run_b is not None:
            raise ValueError("give RUN_A before RUN_B")
        latest = latest_runs(con, lane=lane, last=2)
        refs = [ref_from_row(row) for _, row in latest.iterrows()]
        return [(x, y) for x, y in pairwise(refs) if x.series == y.series]
    if run_b is None:
        raise ValueError("give both RUN_A and RUN_B, or neither (the last two runs of each series)")
    befores, afters = find_runs(con, run_a, lane), find_runs(con, run_b, lane)
    pairs = [(x, y) for x in befores for y in afters if (x.lane, x.split) == (y.lane, y.split)]
    if not pairs:
        raise ValueError(
            f"runs {run_a!r} and {run_b!r} share no lane split: "
            f"{sorted({(r.lane, r.split) for r in befores})} vs {sorted({(r.lane, r.split) for r in afters})}"
        )
    return pairs


def diff_pairs(con: duckdb.DuckDBPyConnection, pairs: list[tuple[RunRef, RunRef]]) -> list[RunDiff]:
    return [diff_runs(con, a, b) for a, b in pairs]


def latest_diff(con: duckdb.DuckDBPyConnection, series: Series) -> RunDiff | None:
    """The last two runs of one series compared, or None."""
    rows = latest_runs(con, lane=series.lane, last=2)
    refs = [r for r in (ref_from_row(row) for _, row in rows.iterrows()) if r.series == series]
    return diff_runs(con, refs[0], refs[1]) if len(refs) == 2 else None
