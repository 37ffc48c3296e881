"""What changed between two runs of a lane split: metric deltas and flipped case predicates."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from eval_pipeline.history.runs import RUN_MATCH, RunRef, find_runs, is_missing, latest_runs, ref_from_row

METRIC_DELTA_COLUMNS = ["metric", "value_a", "value_b", "delta", "denominator_a", "denominator_b"]
FLIP_COLUMNS = ["case_id", "predicate", "change", "passed_a", "passed_b", "surface_a", "surface_b"]

# pass→fail first (what got worse), then fail→pass, then cases that (dis)appeared or became n/a.
_CHANGE_ORDER = {"pass→fail": 0, "fail→pass": 1}


@dataclass(frozen=True)
class RunDiff:
    """Run ``a`` (before) against run ``b`` (after)."""

    a: RunRef
    b: RunRef
    metric_deltas: pd.DataFrame  # METRIC_DELTA_COLUMNS; delta = value_b - value_a
    flips: pd.DataFrame  # FLIP_COLUMNS, pass→fail first


def metric_deltas(con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef) -> pd.DataFrame:
    """Every metric of either run with both values and ``delta = b - a`` (null if either is null)."""
    return con.execute(
        f"""
        WITH a AS (SELECT metric, value, denominator FROM metrics WHERE {RUN_MATCH}),
             b AS (SELECT metric, value, denominator FROM metrics WHERE {RUN_MATCH})
        SELECT metric, a.value AS value_a, b.value AS value_b, b.value - a.value AS delta,
               a.denominator AS denominator_a, b.denominator AS denominator_b
        FROM a FULL OUTER JOIN b USING (metric)
        ORDER BY metric
        """,
        [*a.params(), *b.params()],
    ).df()[METRIC_DELTA_COLUMNS]


def case_flips(con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef) -> pd.DataFrame:
    """Case predicates whose verdict differs between the runs, with each run's final surface.

    ``change`` reads ``pass→fail``, ``fail→pass``, ``pass→n/a``, ``n/a→fail``… (n/a: not
    applicable or the case is absent from that run). Surfaces are the case's last turn and
    are null when the run's transcripts were not kept in history.
    """
    flips = con.execute(
        f"""
        WITH a AS (SELECT case_id, predicate, passed FROM case_predicates WHERE {RUN_MATCH}),
             b AS (SELECT case_id, predicate, passed FROM case_predicates WHERE {RUN_MATCH}),
             sa AS (SELECT case_id, arg_max(surface, turn_index) AS surface FROM transcripts
                    WHERE {RUN_MATCH} GROUP BY case_id),
             sb AS (SELECT case_id, arg_max(surface, turn_index) AS surface FROM transcripts
                    WHERE {RUN_MATCH} GROUP BY case_id)
        SELECT case_id, predicate, a.passed AS passed_a, b.passed AS passed_b,
               sa.surface AS surface_a, sb.surface AS surface_b
        FROM a FULL OUTER JOIN b USING (case_id, predicate)
        LEFT JOIN sa USING (case_id) LEFT JOIN sb USING (case_id)
        WHERE a.passed IS DISTINCT FROM b.passed
        """,
        [*a.params(), *b.params(), *a.params(), *b.params()],
    ).df()
    flips["change"] = [
        f"{_verdict(x)}→{_verdict(y)}" for x, y in zip(flips["passed_a"], flips["passed_b"], strict=True)
    ]
    flips["_order"] = flips["change"].map(lambda c: _CHANGE_ORDER.get(c, 2))
    flips = flips.sort_values(["_order", "case_id", "predicate"], kind="stable")
    return flips[FLIP_COLUMNS].reset_index(drop=True)


def diff_runs(con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef) -> RunDiff:
    return RunDiff(a, b, metric_deltas(con, a, b), case_flips(con, a, b))


def pairs_to_diff(
    con: duckdb.DuckDBPyConnection,
    run_a: str | None = None,
    run_b: str | None = None,
    *,
    lane: str | None = None,
) -> list[tuple[RunRef, RunRef]]:
    """Which runs to compare.

    No run ids: the last two runs of every series (lane, split, runtime). Two run ids: their
    lane runs paired by lane and split (the runtimes may differ: that compares runtimes).
    Raises KeyError for an unknown run and ValueError when the runs share no lane split.
    """
    if run_a is None:
        if run_b is not None:
            raise ValueError("give RUN_A before RUN_B")
        latest = latest_runs(con, lane=lane, last=2)
        pairs = []
        for _, series in latest.groupby(["lane", "split", "runtime"], sort=True):
            if len(series) == 2:
                pairs.append((ref_from_row(series.iloc[0]), ref_from_row(series.iloc[1])))
        return pairs
    if run_b is None:
        raise ValueError("give both RUN_A and RUN_B, or neither (the last two runs of each lane split)")
    befores, afters = find_runs(con, run_a, lane), find_runs(con, run_b, lane)
    pairs = [(x, y) for x in befores for y in afters if (x.lane, x.split) == (y.lane, y.split)]
    if not pairs:
        raise ValueError(
            f"runs {run_a!r} and {run_b!r} share no lane split: "
            f"{sorted({(r.lane, r.split) for r in befores})} vs {sorted({(r.lane, r.split) for r in afters})}"
        )
    return pairs


def _verdict(passed: object) -> str:
    if is_missing(passed):
        return "n/a"
    return "pass" if bool(passed) else "fail"


def diff_pairs(con: duckdb.DuckDBPyConnection, pairs: list[tuple[RunRef, RunRef]]) -> list[RunDiff]:
    return [diff_runs(con, a, b) for a, b in pairs]


def latest_diff(con: duckdb.DuckDBPyConnection, lane: str, split: str, runtime: str) -> RunDiff | None:
    """The last two runs of one series compared, or None when it has fewer than two runs."""
    rows = latest_runs(con, lane=lane, last=2)
    series = rows[(rows["split"] == split) & (rows["runtime"] == runtime)]
    if len(series) < 2:
        return None
    return diff_runs(con, ref_from_row(series.iloc[0]), ref_from_row(series.iloc[1]))
