"""When did a case start failing? The first pass→fail of each of its predicates, per series."""

from __future__ import annotations

import difflib

import duckdb
import pandas as pd

FIRST_FAILURE_COLUMNS = [
    "lane",
    "split",
    "runtime",
    "predicate",
    "run_id",
    "date",
    "previous_run_id",
    "previous_date",
    "surface_before",
    "surface_after",
    "surface_change",
]


def first_failures(
    con: duckdb.DuckDBPyConnection, case_id: str, *, predicate: str | None = None, lane: str | None = None
) -> pd.DataFrame:
    """For each series (lane, split, runtime) and predicate of ``case_id``: the first run whose
    verdict was fail while the run before it (with a verdict) passed, and both final surfaces.

    Empty when the case never went from pass to fail. KeyError when history has no such case.
    """
    known = con.execute(
        "SELECT count(*) FROM case_predicates WHERE case_id = ? AND (? IS NULL OR predicate = ?) "
        "AND (? IS NULL OR lane = ?)",
        [case_id, predicate, predicate, lane, lane],
    ).fetchone()
    if not known or known[0] == 0:
        scope = "".join(
            [f" predicate {predicate!r}" if predicate else "", f" in lane {lane!r}" if lane else ""]
        )
        raise KeyError(f"no verdicts for case {case_id!r}{scope} in history")
    rows = con.execute(
        """
        WITH verdicts AS (
            SELECT cp.lane, cp.split, cp.runtime, cp.predicate, cp.run_id, r.date, r.seq, cp.passed,
                   lag(cp.passed) OVER w AS previous_passed,
                   lag(cp.run_id) OVER w AS previous_run_id,
                   lag(r.date) OVER w AS previous_date
            FROM case_predicates cp JOIN runs r USING (run_id, lane, split, runtime)
            WHERE cp.case_id = ? AND cp.passed IS NOT NULL
              AND (? IS NULL OR cp.predicate = ?) AND (? IS NULL OR cp.lane = ?)
            WINDOW w AS (PARTITION BY cp.lane, cp.split, cp.runtime, cp.predicate ORDER BY r.seq)),
        first AS (
            SELECT * FROM verdicts WHERE previous_passed AND NOT passed
            QUALIFY row_number() OVER (PARTITION BY lane, split, runtime, predicate ORDER BY seq) = 1),
        surfaces AS (
            SELECT run_id, lane, split, runtime, arg_max(surface, turn_index) AS surface
            FROM transcripts WHERE case_id = ? GROUP BY run_id, lane, split, runtime)
        SELECT f.lane, f.split, f.runtime, f.predicate, f.run_id, f.date, f.previous_run_id, f.previous_date,
               before.surface AS surface_before, after.surface AS surface_after
        FROM first f
        LEFT JOIN surfaces after ON after.run_id = f.run_id AND after.lane = f.lane
             AND after.split = f.split AND after.runtime = f.runtime
        LEFT JOIN surfaces before ON before.run_id = f.previous_run_id AND before.lane = f.lane
             AND before.split = f.split AND before.runtime = f.runtime
        ORDER BY f.date, f.lane, f.split, f.runtime, f.predicate
        """,
        [case_id, predicate, predicate, lane, lane, case_id],
    ).df()
    rows["surface_change"] = [
        surface_change(before, after)
        for before, after in zip(rows["surface_before"], rows["surface_after"], strict=True)
    ]
    return rows[FIRST_FAILURE_COLUMNS]


def surface_change(before: object, after: object) -> str | None:
    """A word-level diff: ``[-removed-] {+added+}``; None when either surface was not kept."""
    if not isinstance(before, str) or not isinstance(after, str):
        return None
    if before == after:
        return "(surface unchanged)"
    old, new = before.split(), after.split()
    parts: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            parts.append(" ".join(old[i1:i2]))
            continue
        if i2 > i1:
            parts.append("[-" + " ".join(old[i1:i2]) + "-]")
        if j2 > j1:
            parts.append("{+" + " ".join(new[j1:j2]) + "+}")
    return " ".join(parts)
