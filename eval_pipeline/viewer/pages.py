"""The data each viewer page shows, read from history: plain values, no HTML.

Every function takes a connection with the history views (:func:`eval_pipeline.history.connect`)
and asks DuckDB for what its page shows only: a page of failing cases or of grid rows
(``LIMIT``/``OFFSET``, filters and search in the query), surfaces of the cases shown, fault
messages grouped in the query. Something the page names that history does not hold raises
:class:`NotFound`, whose message says what was not found.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal

import duckdb
import pandas as pd

from eval_pipeline.failures import BLOCKING_SEVERITIES, REPORT_SEVERITIES, evidence_object
from eval_pipeline.history.diff import RunDiff, diff_pairs, latest_diff, pairs_to_diff
from eval_pipeline.history.report import lane_charts
from eval_pipeline.history.runs import RUN_MATCH, RunRef, find_runs, is_missing, latest_runs, ref_from_row
from eval_pipeline.history.svg import Chart, Point, trend_svg
from eval_pipeline.history.views import SERIES_SQL
from eval_pipeline.samples import SAMPLE_INDEX, flaky_within_run
from eval_pipeline.scoring import verdict_word

PAGE_ROWS = 50  # failing cases on a run page, cases on a grid page
SPARK_RUNS = 20  # runs a sparkline on the series list spans
FAULTS_SHOWN = 20
# The worst word wins a run's verdict: void, then fail, warn, pass; n/a when nothing was checked.
_WORST = ("void", "fail", "warn", "pass", "n/a")
GridFilter = Literal["", "failing", "disagree"]
GRID_FILTERS: dict[str, str] = {
    "": "every case",
    "failing": "failing anywhere",
    "disagree": "runtimes disagree",
}


class NotFound(LookupError):
    """What a page names is not in history; the message says what."""


@dataclass(frozen=True)
class SeriesKey:
    lane: str
    split: str
    runtime: str
    case_set: str

    def params(self) -> list[str]:
        return [self.lane, self.split, self.runtime, self.case_set]


@dataclass(frozen=True)
class SeriesRow:
    """One series on the home page: its latest run, that run's verdict, its recent runs' shares
    of checks passed (oldest first; None: a run with no check)."""

    key: SeriesKey
    latest: RunRef
    verdict: str
    runs: int
    passed_shares: list[float | None]


@dataclass(frozen=True)
class Home:
    series: list[SeriesRow]
    lanes: list[tuple[str, list[str]]]  # each lane with runs, and its splits


@dataclass(frozen=True)
class Check:
    metric: str
    value: float | None
    numerator: float | None
    denominator: float | None
    threshold_op: str | None
    threshold: float | None
    severity: str | None
    verdict: str


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
    key: SeriesKey
    charts: list[str]  # one SVG per metric, the threshold drawn
    runs: list[RunSummary]  # newest first


@dataclass(frozen=True)
class FailingRow:
    case_id: str
    predicate: str
    severity: str
    code: str
    reason: str
    surface: str | None  # the case's last surface (sample 0); None: transcripts not kept


@dataclass(frozen=True)
class Fault:
    turns: int
    fault: str


@dataclass(frozen=True)
class LaneRunPage:
    """One lane run under a run id: its checks, a page of failing cases, its faults."""

    ref: RunRef
    verdict: str
    checks: list[Check]
    failing: list[FailingRow]
    failing_results: int  # all of them, not only this page's
    failing_cases: int
    faults: list[Fault]
    cases: int
    turns: int
    samples: int
    transcripts_kept: bool


@dataclass(frozen=True)
class RunPage:
    run_id: str
    lanes: list[LaneRunPage]
    page: int
    pages: int  # of failing cases, over the lane run with the most


@dataclass(frozen=True)
class Turn:
    turn_index: int
    role: str
    prompt: str | None
    surface: str | None
    grounding_source: str | None
    latency_ms: float | None
    error: str | None
    attempts: int | None
    seed: int | None


@dataclass(frozen=True)
class CaseVerdict:
    predicate: str
    verdict: str  # pass, fail (a hard result), warn (a report one), n/a
    severity: str
    code: str
    reason: str
    evidence: dict[str, Any]


@dataclass(frozen=True)
class Sample:
    index: int
    turns: list[Turn]
    verdicts: list[CaseVerdict]


@dataclass(frozen=True)
class CasePage:
    ref: RunRef
    case_id: str
    verdict: str
    samples: list[Sample]


@dataclass(frozen=True)
class GridCell:
    verdict: str
    surface: str | None


@dataclass(frozen=True)
class GridPage:
    lane: str
    split: str
    splits: list[str]
    runs: list[RunRef]  # one column per runtime target: the latest run of its series
    rows: list[tuple[str, list[GridCell | None]]]  # case id, a cell per run (None: not in that run)
    filter: str
    query: str
    matching: int  # cases that pass the filter and search, all pages
    page: int
    pages: int


@dataclass(frozen=True)
class ComparePage:
    run_a: str
    run_b: str
    diffs: list[RunDiff] = field(default_factory=list)


def home(con: duckdb.DuckDBPyConnection) -> Home:
    """Every series with its latest run, that run's verdict and a sparkline of its recent runs."""
    recent = con.execute(
        f"""
        WITH r AS (SELECT * FROM runs QUALIFY seq > max(seq) OVER (PARTITION BY {SERIES_SQL}) - ?),
             c AS (SELECT run_id, {SERIES_SQL}, count(*) FILTER (WHERE passed IS NOT NULL) AS checks,
                          count(*) FILTER (WHERE passed) AS passed, list(DISTINCT verdict) AS verdicts
                   FROM metrics GROUP BY ALL)
        SELECT r.*, c.checks, c.passed, c.verdicts,
               max(r.seq) OVER (PARTITION BY {", ".join(f"r.{c}" for c in SERIES_SQL.split(", "))}) AS total
        FROM r LEFT JOIN c USING (run_id, {SERIES_SQL})
        ORDER BY {SERIES_SQL}, seq
        """,
        [SPARK_RUNS],
    ).df()
    rows: list[SeriesRow] = []
    for _, runs in recent.groupby(list(SERIES_SQL.split(", ")), sort=True):
        last = runs.iloc[-1]
        shares = [
            None if is_missing(checks) or not checks else float(passed) / float(checks)
            for checks, passed in zip(runs["checks"], runs["passed"], strict=True)
        ]
        ref = ref_from_row(last)
        rows.append(
            SeriesRow(
                SeriesKey(ref.lane, ref.split, ref.runtime, ref.case_set),
                ref,
                worst(_words(last["verdicts"])),
                int(last["total"]),
                shares,
            )
        )
    lanes: dict[str, set[str]] = {}
    for row in rows:
        lanes.setdefault(row.key.lane, set()).add(row.key.split)
    return Home(rows, [(lane, sorted(splits)) for lane, splits in sorted(lanes.items())])


def series_page(con: duckdb.DuckDBPyConnection, key: SeriesKey) -> SeriesPage:
    """One series: a chart per metric over its runs (threshold drawn), and its runs, newest first."""
    runs = con.execute(
        "SELECT * FROM runs WHERE lane = ? AND split = ? AND runtime = ? AND case_set = ? ORDER BY seq DESC",
        key.params(),
    ).df()
    if runs.empty:
        raise NotFound(
            f"no series lane {key.lane!r}, split {key.split!r}, runtime {key.runtime!r}, "
            f"case set {key.case_set!r} in history"
        )
    verdicts = dict(
        con.execute(
            "SELECT run_id, list(DISTINCT verdict) FROM metrics "
            "WHERE lane = ? AND split = ? AND runtime = ? AND case_set = ? GROUP BY run_id",
            key.params(),
        ).fetchall()
    )
    points = con.execute(
        "SELECT metric, coalesce(started_at, date::TIMESTAMPTZ) AS run_at, value, threshold_op, threshold "
        "FROM metrics WHERE lane = ? AND split = ? AND runtime = ? AND case_set = ? ORDER BY metric, run_at",
        key.params(),
    ).df()
    charts = []
    for metric, rows in points.groupby("metric", sort=True):
        line: list[Point] = [
            (pd.Timestamp(at).to_pydatetime(), None if is_missing(v) else float(v))
            for at, v in zip(rows["run_at"], rows["value"], strict=True)
        ]
        last = rows.iloc[-1]
        threshold = None if is_missing(last["threshold"]) else float(last["threshold"])
        label = f"{last['threshold_op']} {threshold:g}" if threshold is not None else ""
        charts.append(trend_svg(Chart(str(metric), {key.runtime: line}, threshold, label)))
    summaries = [
        RunSummary(
            ref_from_row(row),
            None if is_missing(row["started_at"]) else pd.Timestamp(row["started_at"]).to_pydatetime(),
            worst(_words(verdicts.get(str(row["run_id"])))),
            int(row["blocking_failures"]),
            int(row["warnings"]),
        )
        for _, row in runs.iterrows()
    ]
    return SeriesPage(key, charts, summaries)


def run_page(con: duckdb.DuckDBPyConnection, run_id: str, page: int = 1) -> RunPage:
    """Every lane run under ``run_id`` (or a unique prefix): checks, page ``page`` of its failing
    cases (hard first; a case predicate failing in several samples once, from its first failing
    sample), the surfaces of the cases shown only, and its fault messages with their counts."""
    refs = _lane_runs(con, run_id)
    lanes = [_lane_run(con, ref, page) for ref in refs]
    pages = max((_pages(lane.failing_results) for lane in lanes), default=1)
    return RunPage(refs[0].run_id, lanes, page, pages)


def _lane_runs(con: duckdb.DuckDBPyConnection, run_id: str) -> list[RunRef]:
    try:
        return find_runs(con, run_id)
    except KeyError as exc:
        raise NotFound(str(exc.args[0]) if exc.args else f"no run {run_id!r} in history") from None


def checks_of(con: duckdb.DuckDBPyConnection, ref: RunRef) -> list[Check]:
    """The run's metrics, checked ones first (missed ones first among them), then by name."""
    rows = con.execute(
        "SELECT metric, value, numerator, denominator, threshold_op, threshold, severity, passed, verdict "
        f"FROM metrics WHERE {RUN_MATCH} ORDER BY threshold IS NULL, passed NULLS FIRST, severity, metric",
        ref.params(),
    ).fetchall()
    return [
        Check(
            str(metric),
            _float(value),
            _float(numerator),
            _float(denominator),
            None if op is None else str(op),
            _float(threshold),
            None if severity is None else str(severity),
            str(verdict) if verdict is not None else verdict_word(passed, severity),
        )
        for metric, value, numerator, denominator, op, threshold, severity, passed, verdict in rows
    ]


@dataclass(frozen=True)
class Failing:
    """Some of a run's failing case predicates, in :func:`eval_pipeline.failures.failing_cases`
    order, and how many there are in all."""

    rows: list[FailingRow]
    results: int
    cases: int


def run_size(con: duckdb.DuckDBPyConnection, ref: RunRef) -> tuple[int, int]:
    """The run's cases and samples per case."""
    row = con.execute(
        f"SELECT count(DISTINCT case_id), coalesce(max(sample_index), 0) + 1 FROM case_predicates "
        f"WHERE {RUN_MATCH}",
        ref.params(),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 1)


def failing_of(
    con: duckdb.DuckDBPyConnection, ref: RunRef, *, samples: int, limit: int, offset: int = 0
) -> Failing:
    """Rows ``offset`` to ``offset + limit`` of the run's failing case predicates, as
    :func:`eval_pipeline.failures.failing_cases` lists them (hard first, then by case and
    predicate; a case predicate failing in several samples once, from its first failing
    sample, its reason saying in how many), ordered and cut in the query; then the last
    surfaces of the cases shown."""
    counts = con.execute(
        f"SELECT count(*), count(DISTINCT case_id) FROM (SELECT DISTINCT case_id, predicate "
        f"FROM case_predicates WHERE {RUN_MATCH} AND passed = false)",
        ref.params(),
    ).fetchone()
    results, cases = (int(counts[0]), int(counts[1])) if counts else (0, 0)
    rows = con.execute(
        f"""
        SELECT case_id, predicate, arg_min(severity, coalesce(sample_index, 0)) AS severity,
               arg_min(code, coalesce(sample_index, 0)) AS code, arg_min(message, coalesce(sample_index, 0)) AS message,
               count(*) AS failed_in
        FROM case_predicates WHERE {RUN_MATCH} AND passed = false
        GROUP BY case_id, predicate
        ORDER BY CASE WHEN list_contains(?, arg_min(severity, coalesce(sample_index, 0))) THEN 0
                      WHEN list_contains(?, arg_min(severity, coalesce(sample_index, 0))) THEN 1 ELSE 2 END,
                 case_id, predicate
        LIMIT ? OFFSET ?
        """,
        [*ref.params(), list(BLOCKING_SEVERITIES), list(REPORT_SEVERITIES), limit, offset],
    ).fetchall()
    surfaces = last_surfaces(con, ref, sorted({str(row[0]) for row in rows}))
    kept = bool(surfaces) or _has_transcripts(con, ref)
    return Failing(
        [
            FailingRow(
                str(case_id),
                str(predicate),
                str(severity),
                str(code),
                (f"In {failed_in} of {samples} samples: " if samples > 1 else "") + str(message),
                surfaces.get(str(case_id)) if kept else None,
            )
            for case_id, predicate, severity, code, message, failed_in in rows
        ],
        results,
        cases,
    )


def _lane_run(con: duckdb.DuckDBPyConnection, ref: RunRef, page: int) -> LaneRunPage:
    checks = checks_of(con, ref)
    cases, samples = run_size(con, ref)
    failing = failing_of(con, ref, samples=samples, limit=PAGE_ROWS, offset=(max(page, 1) - 1) * PAGE_ROWS)
    turns_row = con.execute(f"SELECT count(*) FROM transcripts WHERE {RUN_MATCH}", ref.params()).fetchone()
    turns = int(turns_row[0]) if turns_row else 0
    faults = con.execute(
        f"SELECT count(*) AS turns, error FROM transcripts WHERE {RUN_MATCH} AND error IS NOT NULL "
        "GROUP BY error ORDER BY turns DESC, error LIMIT ?",
        [*ref.params(), FAULTS_SHOWN],
    ).fetchall()
    return LaneRunPage(
        ref,
        worst([c.verdict for c in checks]),
        checks,
        failing.rows,
        failing.results,
        failing.cases,
        [Fault(int(n), str(error)) for n, error in faults],
        cases,
        turns,
        samples,
        turns > 0,
    )


def last_surfaces(con: duckdb.DuckDBPyConnection, ref: RunRef, case_ids: list[str]) -> dict[str, str]:
    """The last surface of sample 0 of each of ``case_ids`` (only those are read)."""
    if not case_ids:
        return {}
    rows = con.execute(
        f"SELECT case_id, arg_max(surface, turn_index) FROM transcripts WHERE {RUN_MATCH} "
        "AND coalesce(sample_index, 0) = 0 AND case_id IN (SELECT unnest(?)) GROUP BY case_id",
        [*ref.params(), case_ids],
    ).fetchall()
    return {str(case_id): "" if surface is None else str(surface) for case_id, surface in rows}


def case_pages(con: duckdb.DuckDBPyConnection, run_id: str, case_id: str) -> list[CasePage]:
    """The case's whole transcript in every lane run under ``run_id`` that has it: each sample's
    turns (prompt, surface, grounding, latency, fault) and its verdicts (code, reason, evidence)."""
    pages = cases_in_run(con, run_id, [case_id]).get(case_id)
    if not pages:
        raise NotFound(f"no case {case_id!r} in run {run_id!r}")
    return pages


def cases_in_run(
    con: duckdb.DuckDBPyConnection, run_id: str, case_ids: list[str]
) -> dict[str, list[CasePage]]:
    """:func:`case_pages` of several cases of one run, read in two queries per lane run; a case
    the run does not hold is left out."""
    found: dict[str, list[CasePage]] = {}
    for ref in _lane_runs(con, run_id):
        turns = con.execute(
            "SELECT case_id, coalesce(sample_index, 0) AS sample, turn_index, role, prompt, surface, "
            f"grounding_source, latency_ms, error, attempts, seed FROM transcripts WHERE {RUN_MATCH} "
            "AND case_id IN (SELECT unnest(?)) ORDER BY case_id, sample, turn_index",
            [*ref.params(), case_ids],
        ).df()
        verdicts = con.execute(
            "SELECT case_id, coalesce(sample_index, 0) AS sample, predicate, passed, severity, code, message, "
            f"evidence::VARCHAR AS evidence FROM case_predicates WHERE {RUN_MATCH} "
            "AND case_id IN (SELECT unnest(?)) ORDER BY case_id, sample, passed NULLS LAST, predicate",
            [*ref.params(), case_ids],
        ).df()
        turns_of = {str(c): rows for c, rows in turns.groupby("case_id", sort=False)}
        verdicts_of = {str(c): rows for c, rows in verdicts.groupby("case_id", sort=False)}
        for case_id in sorted(turns_of.keys() | verdicts_of.keys()):
            case_turns = turns_of.get(case_id, turns.iloc[:0])
            case_verdicts = verdicts_of.get(case_id, verdicts.iloc[:0])
            samples = [
                Sample(
                    index,
                    [_turn(row) for row in case_turns[case_turns["sample"] == index].to_dict("records")],
                    [
                        _verdict(row)
                        for row in case_verdicts[case_verdicts["sample"] == index].to_dict("records")
                    ],
                )
                for index in sorted({int(s) for s in (*case_turns["sample"], *case_verdicts["sample"])})
            ]
            verdict = worst([v.verdict for sample in samples for v in sample.verdicts])
            found.setdefault(case_id, []).append(CasePage(ref, case_id, verdict, samples))
    return found


def _turn(row: Mapping[Hashable, Any]) -> Turn:
    return Turn(
        int(row["turn_index"]),
        str(row["role"]),
        _text(row["prompt"]),
        _text(row["surface"]),
        _text(row["grounding_source"]),
        _float(row["latency_ms"]),
        _text(row["error"]),
        None if is_missing(row["attempts"]) else int(row["attempts"]),
        None if is_missing(row["seed"]) else int(row["seed"]),
    )


def _verdict(row: Mapping[Hashable, Any]) -> CaseVerdict:
    passed = None if is_missing(row["passed"]) else bool(row["passed"])
    severity = _text(row["severity"]) or ""
    return CaseVerdict(
        str(row["predicate"]),
        case_word(passed, severity),
        severity,
        _text(row["code"]) or "",
        _text(row["message"]) or "",
        evidence_object(row["evidence"]),
    )


def case_word(passed: bool | None, severity: str) -> str:
    """A case predicate's verdict word: a failed hard result fails, a failed report one warns."""
    if passed is None:
        return "n/a"
    if passed:
        return "pass"
    return "fail" if severity in BLOCKING_SEVERITIES else "warn"


# A case's verdict in one run, from its sample-0 case predicates, as SQL over (passed, severity).
_CASE_VERDICT_SQL = f"""
    CASE WHEN bool_or(passed = false AND severity IN ({", ".join(f"'{s}'" for s in BLOCKING_SEVERITIES)})) THEN 'fail'
         WHEN bool_or(passed = false) THEN 'warn'
         WHEN bool_or(passed) THEN 'pass' ELSE 'n/a' END
"""


def grid_page(
    con: duckdb.DuckDBPyConnection,
    lane: str,
    split: str | None = None,
    *,
    filter: str = "",
    query: str = "",
    page: int = 1,
) -> GridPage:
    """Cases × runtime targets of one lane split: the latest run of each runtime's series of the
    split's own cases. ``filter`` ``failing`` keeps cases that fail or warn in any run,
    ``disagree`` those with a case predicate whose verdict differs between the runs; ``query``
    keeps cases whose id, a prompt or a surface contains it (case-insensitive). All of it in
    one query, which returns page ``page`` only; then the surfaces of the cells shown."""
    if filter not in GRID_FILTERS:
        raise ValueError(f"filter {filter!r} is not one of {', '.join(repr(f) for f in GRID_FILTERS)}")
    latest = latest_runs(con, lane=lane, last=1)
    if latest.empty:
        raise NotFound(f"no lane {lane!r} in history")
    own = latest[latest["case_set"] == latest["split"]]
    splits = sorted(set(own["split"]))
    split = split or (splits[0] if splits else "")
    if split not in splits:
        raise NotFound(
            f"lane {lane!r} has no runs of split {split!r} on its own cases; splits: {', '.join(splits) or 'none'}"
        )
    runs = [ref_from_row(row) for _, row in own[own["split"] == split].sort_values("runtime").iterrows()]
    rows, matching = _grid_rows(con, runs, filter, query.strip(), page)
    cells = _grid_cells(con, runs, [case for case, _ in rows])
    table: list[tuple[str, list[GridCell | None]]] = []
    for case_id, verdicts in rows:
        line: list[GridCell | None] = [None] * len(runs)
        for col, word in verdicts.items():
            line[col] = GridCell(word, cells.get((case_id, col)))
        table.append((case_id, line))
    return GridPage(lane, split, splits, runs, table, filter, query.strip(), matching, page, _pages(matching))


def _runs_sql(runs: list[RunRef]) -> tuple[str, str, dict[str, str]]:
    """The grid's runs as SQL: a filter on their run ids (constants, so DuckDB skips every
    other run's files by their statistics), each row's column, and the parameters of both."""
    params = {f"run{i}": ref.run_id for i, ref in enumerate(runs)} | {
        f"runtime{i}": ref.runtime for i, ref in enumerate(runs)
    }
    where = "(" + " OR ".join(f"(run_id = $run{i} AND runtime = $runtime{i})" for i in range(len(runs))) + ")"
    column = "CASE " + " ".join(
        f"WHEN run_id = $run{i} AND runtime = $runtime{i} THEN {i}" for i in range(len(runs))
    )
    return where, column + " END", params


def _grid_rows(
    con: duckdb.DuckDBPyConnection, runs: list[RunRef], filter: str, query: str, page: int
) -> tuple[list[tuple[str, dict[int, str]]], int]:
    lane, split = runs[0].lane, runs[0].split
    runs_where, column, params = _runs_sql(runs)
    conditions = {
        "": "true",
        "failing": "list_has_any(list(verdict), ['fail', 'warn'])",
        "disagree": "any_value(disagrees)",
    }
    search = (
        f"""AND (contains(lower(case_id), lower($query)) OR case_id IN (
               SELECT DISTINCT case_id FROM transcripts
               WHERE {runs_where} AND lane = $lane AND split = $split AND case_set = $split
                 AND (contains(lower(prompt), lower($query)) OR contains(lower(surface), lower($query)))))"""
        if query
        else ""
    )
    result = con.execute(
        f"""
        WITH cp AS (
            SELECT case_id, predicate, passed, severity, {column} AS col FROM case_predicates
            WHERE {runs_where} AND lane = $lane AND split = $split AND case_set = $split
              AND coalesce(sample_index, 0) = 0
        ),
        by_predicate AS (
            SELECT case_id,
                   bool_or(min(coalesce(passed::INT, 2)) <> max(coalesce(passed::INT, 2)) OR count(*) < $runs)
                       OVER (PARTITION BY case_id) AS disagrees
            FROM cp GROUP BY case_id, predicate
            QUALIFY row_number() OVER (PARTITION BY case_id) = 1
        ),
        by_run AS (SELECT case_id, col, {_CASE_VERDICT_SQL} AS verdict FROM cp GROUP BY case_id, col),
        by_case AS (
            SELECT case_id, list(verdict ORDER BY col) AS verdicts, list(col ORDER BY col) AS cols
            FROM by_run JOIN by_predicate USING (case_id)
            WHERE true {search}
            GROUP BY case_id
            HAVING {conditions[filter]}
        )
        SELECT case_id, verdicts, cols, count(*) OVER () AS matching FROM by_case
        ORDER BY case_id LIMIT $limit OFFSET $offset
        """,
        {
            **params,
            "lane": lane,
            "split": split,
            "runs": len(runs),
            "limit": PAGE_ROWS,
            "offset": (max(page, 1) - 1) * PAGE_ROWS,
            **({"query": query} if query else {}),
        },
    ).fetchall()
    matching = int(result[0][3]) if result else 0
    return [
        (str(case), dict(zip(cols, verdicts, strict=True))) for case, verdicts, cols, _ in result
    ], matching


def _grid_cells(
    con: duckdb.DuckDBPyConnection, runs: list[RunRef], case_ids: list[str]
) -> dict[tuple[str, int], str]:
    if not case_ids:
        return {}
    runs_where, column, params = _runs_sql(runs)
    rows = con.execute(
        f"SELECT case_id, {column} AS col, arg_max(surface, turn_index) FROM transcripts "
        f"WHERE {runs_where} AND lane = $lane AND split = $split AND case_set = $split "
        "AND coalesce(sample_index, 0) = 0 AND case_id IN (SELECT unnest($cases)) GROUP BY case_id, col",
        {**params, "lane": runs[0].lane, "split": runs[0].split, "cases": case_ids},
    ).fetchall()
    return {(str(case), int(col)): "" if surface is None else str(surface) for case, col, surface in rows}


def compare_page(con: duckdb.DuckDBPyConnection, run_a: str, run_b: str) -> ComparePage:
    """Two runs, lane split by lane split: metric deltas and the flipped cases with both surfaces
    (:func:`eval_pipeline.history.diff.diff_pairs`, what ``diff`` and ``compare`` list)."""
    for run_id in (run_a, run_b):
        _lane_runs(con, run_id)
    try:
        pairs = pairs_to_diff(con, run_a, run_b)
    except (KeyError, ValueError) as exc:
        raise NotFound(str(exc.args[0]) if exc.args else str(exc)) from None
    return ComparePage(run_a, run_b, diff_pairs(con, pairs))


def worst(words: list[str]) -> str:
    """The verdict of several: the first of void, fail, warn, pass present; n/a when none is."""
    present = set(words)
    return next((w for w in _WORST if w in present), "n/a")


def _words(value: object) -> list[str]:
    if value is None or (not isinstance(value, (list, tuple)) and is_missing(value)):
        return []
    return [str(v) for v in value if v is not None]  # type: ignore[attr-defined]


def _pages(rows: int) -> int:
    return max(1, -(-rows // PAGE_ROWS))


def _float(value: object) -> float | None:
    return None if is_missing(value) else float(value)  # type: ignore[arg-type]


def _text(value: object) -> str | None:
    return None if is_missing(value) else str(value)


def day_text(value: date | None) -> str:
    return "?" if value is None else value.isoformat()


REPORT_ROWS = 200  # failing cases (and flaky ones) a lane overview lists per series


@dataclass(frozen=True)
class SideBySide:
    """Metric rows × the lane's series (their latest runs): (value, verdict word) or None."""

    runs: list[RunRef]
    rows: list[tuple[str, list[tuple[float | None, str] | None]]]


@dataclass(frozen=True)
class FlakyRow:
    case_id: str
    predicate: str
    passes: int
    samples: int
    flips: int
    pass_hat_k: float


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
    flaky: list[FlakyRow]
    flaky_cases: int
    flaky_results: int
    diff: RunDiff | None


@dataclass(frozen=True)
class LaneReport:
    lane: str
    side_by_side: SideBySide
    latest: list[LatestRun]
    charts: list[str]


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
            flaky = _flaky(con, ref) if samples > 1 else pd.DataFrame()
            latest.append(
                LatestRun(
                    ref,
                    [c for c in checks_of(con, ref) if c.threshold is not None],
                    failing.rows,
                    failing.results,
                    failing.cases,
                    samples,
                    [
                        FlakyRow(
                            str(r["case_id"]),
                            str(r["predicate"]),
                            int(r["passes"]),
                            int(r["samples"]),
                            int(r["flips"]),
                            float(r["pass_hat_k"]),
                        )
                        for r in flaky.head(REPORT_ROWS).to_dict("records")
                    ],
                    int(flaky["case_id"].nunique()) if len(flaky) else 0,
                    len(flaky),
                    latest_diff(con, ref.series()),
                )
            )
        reports.append(LaneReport(name, _side_by_side(con, refs), latest, lane_charts(con, name)))
    return reports


def _flaky(con: duckdb.DuckDBPyConnection, ref: RunRef) -> pd.DataFrame:
    columns = f"case_id, predicate, passed, {SAMPLE_INDEX}"
    return flaky_within_run(
        con.execute(f"SELECT {columns} FROM case_predicates WHERE {RUN_MATCH}", ref.params()).df()
    )


def _has_transcripts(con: duckdb.DuckDBPyConnection, ref: RunRef) -> bool:
    row = con.execute(f"SELECT count(*) FROM transcripts WHERE {RUN_MATCH}", ref.params()).fetchone()
    return bool(row and row[0])


def _side_by_side(con: duckdb.DuckDBPyConnection, runs: list[RunRef]) -> SideBySide:
    values: dict[tuple[int, str], tuple[float | None, str]] = {}
    for index, ref in enumerate(runs):
        for check in checks_of(con, ref):
            values[(index, check.metric)] = (check.value, check.verdict)
    metrics = sorted({metric for _, metric in values})
    return SideBySide(runs, [(m, [values.get((i, m)) for i in range(len(runs))]) for m in metrics])
