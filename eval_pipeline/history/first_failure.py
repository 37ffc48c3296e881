"""When did a case start failing? The first pass→fail of each of its predicates, per series
(each run's verdict from :mod:`eval_pipeline.history.verdicts`), or its first run when it
failed from the start."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import duckdb
import pandas as pd

from eval_pipeline.core import SERIES_COLUMN_NAMES, SERIES_SQL, Series
from eval_pipeline.history.verdicts import CASE_VERDICTS

FIRST_FAILURE_COLUMNS = [
    "lane",
    "split",
    "runtime",
    "case_set",
    "predicate",
    "since",
    "run_id",
    "date",
    "previous_run_id",
    "previous_date",
    "surface_before",
    "surface_after",
    "surface_change",
]


@dataclass(frozen=True)
class CaseScope:
    """Which verdicts of a case to look at; None means any."""

    case_id: str
    predicate: str | None = None
    lane: str | None = None
    split: str | None = None
    runtime: str | None = None

    def where(self, alias: str = "") -> tuple[str, list[str | None]]:
        """A WHERE condition on case_predicates (``alias.`` prefixed) and its parameters."""
        p = f"{alias}." if alias else ""
        condition = (
            f"{p}case_id = ? AND (? IS NULL OR {p}predicate = ?) AND (? IS NULL OR {p}lane = ?) "
            f"AND (? IS NULL OR {p}split = ?) AND (? IS NULL OR {p}runtime = ?)"
        )
        params: list[str | None] = [self.case_id]
        for value in (self.predicate, self.lane, self.split, self.runtime):
            params += [value, value]
        return condition, params

    def describe(self) -> str:
        parts = [f"predicate {self.predicate!r}" if self.predicate else ""]
        parts += [f"{name} {value!r}" for name, value in self.filters() if value]
        return ", ".join(p for p in parts if p)

    def filters(self) -> list[tuple[str, str | None]]:
        return [("lane", self.lane), ("split", self.split), ("runtime", self.runtime)]


def case_series(con: duckdb.DuckDBPyConnection, scope: CaseScope) -> list[str]:
    """Labels of the series holding verdicts of the case (within ``scope``); KeyError if none."""
    condition, params = scope.where()
    rows = con.execute(
        f"SELECT DISTINCT {SERIES_SQL} FROM case_predicates WHERE {condition} ORDER BY {SERIES_SQL}", params
    ).fetchall()
    if not rows:
        within = f" ({scope.describe()})" if scope.describe() else ""
        raise KeyError(f"no verdicts for case {scope.case_id!r}{within} in history")
    return [Series(*row).label for row in rows]


def first_failures(con: duckdb.DuckDBPyConnection, scope: CaseScope) -> pd.DataFrame:
    """For each series (lane, split, runtime, case set) and predicate of the case: the first run
    whose verdict was fail while the run before it (with a verdict) passed, or its first run when
    it failed from the start ("failing since its first run (date)"), and both final surfaces.

    Empty when the case never failed. KeyError when history has no such case.
    """
    case_series(con, scope)
    condition, params = scope.where("cp")
    rows = con.execute(
        f"""
        WITH verdicts AS (
            SELECT cp.lane, cp.split, cp.runtime, cp.case_set, cp.predicate, cp.run_id, r.date, r.seq,
                   cp.passed,
                   lag(cp.passed) OVER w AS previous_passed,
                   lag(cp.run_id) OVER w AS previous_run_id,
                   lag(r.date) OVER w AS previous_date
            FROM ({CASE_VERDICTS.format(source="case_predicates")}) cp JOIN runs r USING (run_id, {SERIES_SQL})
            WHERE {condition} AND cp.passed IS NOT NULL
            WINDOW w AS (PARTITION BY cp.lane, cp.split, cp.runtime, cp.case_set, cp.predicate ORDER BY r.seq)),
        first AS (
            SELECT * FROM verdicts WHERE NOT passed AND (previous_passed OR previous_run_id IS NULL)
            QUALIFY row_number() OVER (PARTITION BY {SERIES_SQL}, predicate ORDER BY seq) = 1),
        surfaces AS (
            SELECT run_id, {SERIES_SQL}, arg_max(surface, turn_index) AS surface
            FROM transcripts WHERE case_id = ? GROUP BY run_id, {SERIES_SQL})
        SELECT f.lane, f.split, f.runtime, f.case_set, f.predicate,
               CASE WHEN f.previous_run_id IS NULL
                    THEN 'failing since its first run (' || strftime(f.date, '%Y-%m-%d') || ')'
                    ELSE 'went pass→fail' END AS since,
               f.run_id, f.date,
               f.previous_run_id, f.previous_date,
               before.surface AS surface_before, after.surface AS surface_after
        FROM first f
        LEFT JOIN surfaces after ON {_same_series("after", "f")} AND after.run_id = f.run_id
        LEFT JOIN surfaces before ON {_same_series("before", "f")} AND before.run_id = f.previous_run_id
        ORDER BY f.date, f.lane, f.split, f.runtime, f.case_set, f.predicate
        """,
        [*params, scope.case_id],
    ).df()
    rows["surface_change"] = [
        surface_change(before, after)
        for before, after in zip(rows["surface_before"], rows["surface_after"], strict=True)
    ]
    return rows[FIRST_FAILURE_COLUMNS]


def _same_series(left: str, right: str) -> str:
    return " AND ".join(f"{left}.{c} = {right}.{c}" for c in SERIES_COLUMN_NAMES)


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
