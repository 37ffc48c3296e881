"""A run's verdict of each case predicate, and two runs' verdicts side by side: the one flip.

Every question that compares runs (``diff``, ``compare``, ``no_regression``, ``flaky``,
``first-failure``) reads a run's case predicates through :data:`CASE_VERDICTS`: one row per
(run, case, predicate) with

- ``samples``: the samples in which it had a verdict (null ones, not applicable, left out);
  a sample's verdict is the AND of its rows (an i18n assertion may write several);
- ``passes``: how many of them passed;
- ``passed``: the run's verdict, pass when every such sample passed (pass^k; with one sample,
  that sample's verdict), null when none had one;
- ``code`` and ``shown_sample``: the first failing sample's code (else sample 0's), the one a
  reader is shown.

A **flip** between two runs is a case predicate whose run verdict differs (pass→fail,
fail→pass, or to/from n/a); within a series, consecutive runs' verdicts make the sequence that
:mod:`eval_pipeline.metrics.flips` counts. A case predicate is therefore listed once however many
samples either run holds, with both runs' pass counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pandas as pd

from eval_pipeline.core import SERIES_COLUMN_NAMES
from eval_pipeline.history.runs import RUN_MATCH, RunRef, is_missing

RUN_KEYS = ", ".join(("run_id", *SERIES_COLUMN_NAMES))

# {keys}: the run keys a query groups by (none for one run's rows, whose keys are one value
# each); {source}: a relation with case_predicates' columns (a view, a registered frame).
_VERDICTS = """
WITH per_sample AS (
    SELECT {keys}case_id, predicate, coalesce(sample_index, 0) AS sample_index,
           bool_and(passed) AS passed, min(severity) AS severity,
           min(code) FILTER (WHERE passed = false) AS failing_code, min(code) AS any_code
    FROM {source}
    GROUP BY {keys}case_id, predicate, coalesce(sample_index, 0))
SELECT {keys}case_id, predicate,
       count(passed) AS samples,
       count(*) FILTER (WHERE passed) AS passes,
       CASE WHEN count(passed) = 0 THEN NULL ELSE bool_and(passed) END AS passed,
       min(severity) AS severity,
       coalesce(arg_min(failing_code, sample_index) FILTER (WHERE passed = false),
                arg_min(any_code, sample_index)) AS code,
       coalesce(min(sample_index) FILTER (WHERE passed = false), min(sample_index)) AS shown_sample
FROM per_sample
GROUP BY {keys}case_id, predicate
"""
# One row per (run, case, predicate) of the runs in {source} (format it with ``source=``).
CASE_VERDICTS = _VERDICTS.replace("{keys}", f"{RUN_KEYS}, ")

FLIP_COLUMNS = [
    "case_id",
    "predicate",
    "change",
    "passed_a",
    "passed_b",
    "code_a",
    "code_b",
    "passes_a",
    "samples_a",
    "passes_b",
    "samples_b",
    "surface_a",
    "surface_b",
]
# pass→fail first (what got worse), then fail→pass, then cases that (dis)appeared or became n/a.
_CHANGE_ORDER = {"pass→fail": 0, "fail→pass": 1}
SIDE_COLUMNS = ("passed", "passes", "samples", "code", "shown_sample")
SIDE_BY_SIDE_COLUMNS = [
    "case_id",
    "predicate",
    "severity",
    "in_a",
    "in_b",
    *(f"{c}_{side}" for side in ("a", "b") for c in SIDE_COLUMNS),
]


def run_verdicts_sql(source: str = "case_predicates") -> str:
    """:data:`CASE_VERDICTS` of the rows of ``source`` that belong to one run (:data:`RUN_MATCH`),
    without the run keys: filtered on, they are one value each, so nothing groups by them."""
    return _VERDICTS.format(keys="", source=f"(SELECT * FROM {source} WHERE {RUN_MATCH})")


@contextmanager
def side_by_side(
    con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef, *, source_b: str = "case_predicates"
) -> Iterator[str]:
    """Both runs' verdict of every case predicate either holds (:data:`SIDE_BY_SIDE_COLUMNS`) as
    a temporary table of ``con``, its name for the block: a side's columns are null where it has
    no verdict, ``in_a`` / ``in_b`` say whether the run evaluated the case at all (it holds a
    row of it: a verdict or n/a). ``source_b`` names where run ``b``'s rows are (a relation of a
    run not yet in history). The table stays in DuckDB: a reader fetches what it needs (the
    flips, :func:`flipped`; a rate's counts per case, :func:`eval_pipeline.history.pairs.per_case_counts`)."""
    name = f"_sides_{uuid.uuid4().hex}"
    sides = ", ".join(f"{c}_{side}" for side in "ab" for c in SIDE_COLUMNS)
    con.execute(
        f"""CREATE TEMP TABLE {name} AS
            WITH a AS ({run_verdicts_sql()}), b AS ({run_verdicts_sql(source_b)}), joined AS (
                SELECT case_id, predicate, coalesce(b.severity, a.severity) AS severity,
                       {", ".join(f"{side}.{c} AS {c}_{side}" for side in "ab" for c in SIDE_COLUMNS)}
                FROM a FULL OUTER JOIN b USING (case_id, predicate))
            SELECT case_id, predicate, severity,
                   bool_or(samples_a IS NOT NULL) OVER (PARTITION BY case_id) AS in_a,
                   bool_or(samples_b IS NOT NULL) OVER (PARTITION BY case_id) AS in_b,
                   {sides}
            FROM joined""",
        [*a.params(), *b.params()],
    )
    try:
        yield name
    finally:
        con.execute(f"DROP TABLE IF EXISTS {name}")


def flipped(
    con: duckdb.DuckDBPyConnection, sides: str, *, common_cases_only: bool = False, worse_only: bool = False
) -> pd.DataFrame:
    """The rows of the :func:`side_by_side` table ``sides`` whose run verdicts differ: the flips
    (module docstring), by case and predicate. With ``common_cases_only``, cases one of the runs
    did not evaluate are left out; with ``worse_only``, only pass→fail."""
    where = ["passed_a IS DISTINCT FROM passed_b"]
    where += ["in_a AND in_b"] if common_cases_only else []
    where += ["passed_a AND NOT passed_b"] if worse_only else []
    return con.execute(
        f"SELECT {', '.join(SIDE_BY_SIDE_COLUMNS)} FROM {sides} WHERE {' AND '.join(where)} "
        "ORDER BY case_id, predicate"
    ).df()


def shown_surfaces(
    con: duckdb.DuckDBPyConnection, ref: RunRef, cases: pd.DataFrame, side: str
) -> list[str | None]:
    """The last surface of each row's shown sample (``case_id``, ``shown_sample_<side>``) in run
    ``ref``; None where the run has no verdict or kept no transcripts. Reads only those cases."""
    if cases.empty:
        return []
    keys = pd.DataFrame(
        {"case_id": cases["case_id"].astype(str), "sample": cases[f"shown_sample_{side}"].astype("Int64")}
    )
    con.register("_shown_keys", keys)
    try:
        found = con.execute(
            f"""SELECT t.case_id, coalesce(t.sample_index, 0) AS sample, arg_max(t.surface, t.turn_index) AS surface
                FROM transcripts t SEMI JOIN _shown_keys k
                  ON t.case_id = k.case_id AND coalesce(t.sample_index, 0) = k.sample
                WHERE {RUN_MATCH} GROUP BY ALL""",
            ref.params(),
        ).fetchall()
    finally:
        con.unregister("_shown_keys")
    surface: dict[tuple[str, int], str | None] = {(str(c), int(s)): text for c, s, text in found}
    return [
        None if pd.isna(sample) else surface.get((str(case), int(sample)))
        for case, sample in zip(keys["case_id"], keys["sample"], strict=True)
    ]


def flip_rows(
    con: duckdb.DuckDBPyConnection,
    a: RunRef,
    b: RunRef,
    sides: str,
    *,
    common_cases_only: bool = False,
    surfaces: bool = True,
) -> pd.DataFrame:
    """The flips of ``sides`` (the :func:`side_by_side` table of ``a`` and ``b``) as :data:`FLIP_COLUMNS`:
    ``change`` reads ``pass→fail``, ``fail→pass``, ``pass→n/a``, ``n/a→fail``…, pass→fail
    first, then by case and predicate; each side's pass counts and its shown sample's surface."""
    flips = flipped(con, sides, common_cases_only=common_cases_only)
    flips["change"] = [
        f"{verdict_text(x)}→{verdict_text(y)}"
        for x, y in zip(flips["passed_a"], flips["passed_b"], strict=True)
    ]
    for side, ref in (("a", a), ("b", b)):
        shown: list[str | None] = shown_surfaces(con, ref, flips, side) if surfaces else [None] * len(flips)
        flips[f"surface_{side}"] = pd.Series(shown, index=flips.index, dtype=object)
        for column in ("passes", "samples"):
            flips[f"{column}_{side}"] = flips[f"{column}_{side}"].astype("Int64")
    order = flips["change"].map(lambda c: _CHANGE_ORDER.get(c, 2))
    flips = flips.assign(_order=order).sort_values(["_order", "case_id", "predicate"], kind="stable")
    return flips[FLIP_COLUMNS].reset_index(drop=True)


def verdict_text(passed: object) -> str:
    """pass, fail, or n/a (null: not applicable, or the case is absent)."""
    if is_missing(passed):
        return "n/a"
    return "pass" if bool(passed) else "fail"
