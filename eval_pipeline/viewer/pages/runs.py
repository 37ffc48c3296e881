"""A run's page: per lane run, its checks, a page of its failing cases, its faults."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from eval_pipeline.history.runs import RUN_MATCH, RunRef
from eval_pipeline.metrics import FLAKY_READS, USAGE_METRICS, flaky_within_run, verdict_word
from eval_pipeline.outcome import (
    BLOCKING_SEVERITIES,
    LANE_CHECKS,
    REPORT_SEVERITIES,
    CheckOutcome,
    committed_outcome,
)
from eval_pipeline.viewer.links import TextRef
from eval_pipeline.viewer.pages.common import (
    Preview,
    float_or_none,
    lane_runs,
    page_count,
    preview,
    preview_sql,
)

RUN_PAGE_ROWS = 50  # failing cases a run page shows
FAULTS_SHOWN = 20


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
class FailingRow:
    case_id: str
    predicate: str
    severity: str
    code: str
    reason: str
    # The case's last surface (sample 0), or for a turn row that turn's (in its first failing
    # sample); None: transcripts not kept.
    surface: Preview | None
    turn: str = ""  # "turn 3" where a case judged per turn failed


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
    usage: list[Check]  # turns, tokens, cost, latency and TTFT percentiles (no threshold), those with a value
    failing: list[FailingRow]
    failing_results: int  # all of them, not only this page's
    failing_cases: int
    failing_listed: int  # the ones the pages list (a run's outcome keeps the first of them)
    lane_checks: list[CheckOutcome]  # measurement, no_regression: as the run's outcome holds them
    flaky: Flaky
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


def run_page(con: duckdb.DuckDBPyConnection, run_id: str, page: int = 1) -> RunPage:
    """Every lane run under ``run_id`` (or a unique prefix): checks, page ``page`` of its failing
    cases (hard first; a case predicate failing in several samples once, from its first failing
    sample), the surfaces of the cases shown only, and its fault messages with their counts."""
    refs = lane_runs(con, run_id)
    lanes = [_lane_run(con, ref, page) for ref in refs]
    pages = max((page_count(lane.failing_listed, RUN_PAGE_ROWS) for lane in lanes), default=1)
    return RunPage(refs[0].run_id, lanes, page, pages)


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
            float_or_none(value),
            float_or_none(numerator),
            float_or_none(denominator),
            None if op is None else str(op),
            float_or_none(threshold),
            None if severity is None else str(severity),
            str(verdict) if verdict is not None else verdict_word(passed, severity),
        )
        for metric, value, numerator, denominator, op, threshold, severity, passed, verdict in rows
    ]


@dataclass(frozen=True)
class Failing:
    """Some of a run's failing case predicates, in :func:`eval_pipeline.outcome.failures.failing_cases`
    order, and how many there are in all."""

    rows: list[FailingRow]
    results: int
    cases: int
    listed: int  # how many of them can be paged through


def run_size(con: duckdb.DuckDBPyConnection, ref: RunRef) -> tuple[int, int]:
    """The run's cases and samples per case: the cases judged as a whole or turn by turn (a lane
    whose probe is judged per turn writes no case rows)."""
    row = con.execute(
        f"SELECT count(DISTINCT case_id), coalesce(max(sample_index), 0) + 1 FROM ("
        f"SELECT case_id, sample_index FROM case_predicates WHERE {RUN_MATCH} "
        f"UNION ALL SELECT case_id, sample_index FROM turn_verdicts WHERE {RUN_MATCH})",
        ref.params() * 2,
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 1)


def failing_of(
    con: duckdb.DuckDBPyConnection, ref: RunRef, *, samples: int, limit: int, offset: int = 0
) -> Failing:
    """Items ``offset`` to ``offset + limit`` of the run's failing items as its stored outcome
    lists them (case rows, and the turns of cases judged per turn), with the last surfaces of
    the cases shown (a turn row: that turn's surface); for a run committed before runs stored an
    outcome, its failing case rows."""
    outcome = committed_outcome(con, ref)
    if outcome is None:
        return _failing_case_rows(con, ref, samples=samples, limit=limit, offset=offset)
    items = outcome.failing[offset : offset + limit]
    surfaces = last_surfaces(con, ref, sorted({item.case_id for item in items if item.turn_index is None}))
    turns = turn_surfaces(
        con,
        ref,
        [(item.case_id, item.turn_index, item.predicate) for item in items if item.turn_index is not None],
    )
    kept = bool(surfaces) or bool(turns) or _has_transcripts(con, ref)
    shown = [
        None
        if not kept
        else surfaces.get(item.case_id)
        if item.turn_index is None
        else turns.get((item.case_id, item.turn_index, item.predicate))
        for item in items
    ]
    return Failing(
        [
            FailingRow(
                item.case_id, item.predicate, item.severity, item.code, item.reason, surface, item.where
            )
            for item, surface in zip(items, shown, strict=True)
        ],
        outcome.failing_results,
        outcome.failing_cases,
        len(outcome.failing),
    )


def _failing_case_rows(
    con: duckdb.DuckDBPyConnection, ref: RunRef, *, samples: int, limit: int, offset: int = 0
) -> Failing:
    """Rows ``offset`` to ``offset + limit`` of the run's failing case predicates, as
    :func:`eval_pipeline.outcome.failures.failing_cases` lists them (hard first, then by case and
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
        results,
    )


@dataclass(frozen=True)
class FlakyRow:
    case_id: str
    predicate: str
    passes: int
    samples: int
    flips: int
    pass_hat_k: float


@dataclass(frozen=True)
class Flaky:
    """The first case predicates whose samples disagree within the run (most flips first), and
    how many there are: cases and results. Empty for a run of one sample."""

    rows: list[FlakyRow]
    cases: int
    results: int


def flaky_of(con: duckdb.DuckDBPyConnection, ref: RunRef, *, samples: int, limit: int) -> Flaky:
    """:func:`eval_pipeline.metrics.samples.flaky_within_run` of the run, its first ``limit`` rows; the
    verdict columns are read only when the run has several samples."""
    if samples <= 1:
        return Flaky([], 0, 0)
    query = f"SELECT {', '.join(FLAKY_READS)} FROM case_predicates WHERE {RUN_MATCH}"
    flaky = flaky_within_run([con.execute(query, ref.params()).df()], samples)
    rows = [
        FlakyRow(
            str(r["case_id"]),
            str(r["predicate"]),
            int(r["passes"]),
            int(r["samples"]),
            int(r["flips"]),
            float(r["pass_hat_k"]),
        )
        for r in flaky.head(limit).to_dict("records")
    ]
    return Flaky(rows, int(flaky["case_id"].nunique()) if len(flaky) else 0, len(flaky))


def _lane_run(con: duckdb.DuckDBPyConnection, ref: RunRef, page: int) -> LaneRunPage:
    measured = checks_of(con, ref)
    usage_rows = [c for c in measured if c.metric in USAGE_METRICS and c.threshold is None]
    # A usage metric the runtime never reported (tokens of a runtime that counts none) is null
    # in every run of it: a row of nulls says nothing, so the page leaves it out.
    usage = sorted(
        (c for c in usage_rows if c.value is not None), key=lambda c: USAGE_METRICS.index(c.metric)
    )
    checks = [c for c in measured if c not in usage_rows]
    cases, samples = run_size(con, ref)
    failing = failing_of(
        con, ref, samples=samples, limit=RUN_PAGE_ROWS, offset=(max(page, 1) - 1) * RUN_PAGE_ROWS
    )
    turns_row = con.execute(f"SELECT count(*) FROM transcripts WHERE {RUN_MATCH}", ref.params()).fetchone()
    turns = int(turns_row[0]) if turns_row else 0
    faults = con.execute(
        f"SELECT count(*) AS turns, error FROM transcripts WHERE {RUN_MATCH} AND error IS NOT NULL "
        "GROUP BY error ORDER BY turns DESC, error LIMIT ?",
        [*ref.params(), FAULTS_SHOWN],
    ).fetchall()
    return LaneRunPage(
        ref,
        run_verdict(con, ref),
        checks,
        usage,
        failing.rows,
        failing.results,
        failing.cases,
        failing.listed,
        lane_checks_of(con, ref),
        flaky_of(con, ref, samples=samples, limit=RUN_PAGE_ROWS),
        [Fault(int(n), str(error)) for n, error in faults],
        cases,
        turns,
        samples,
        turns > 0,
    )


def lane_checks_of(con: duckdb.DuckDBPyConnection, ref: RunRef) -> list[CheckOutcome]:
    """The run's checks that gate no metric (measurement, no_regression), from its stored outcome."""
    outcome = committed_outcome(con, ref)
    return [] if outcome is None else [c for c in outcome.checks if c.name in LANE_CHECKS]


def run_verdict(con: duckdb.DuckDBPyConnection, ref: RunRef) -> str:
    """The lane run's verdict as history holds it (the ``runs`` view: its stored outcome's)."""
    row = con.execute(f"SELECT verdict FROM runs WHERE {RUN_MATCH}", ref.params()).fetchone()
    return "n/a" if row is None else str(row[0])


def last_surfaces(con: duckdb.DuckDBPyConnection, ref: RunRef, case_ids: list[str]) -> dict[str, Preview]:
    """The last surface of sample 0 of each of ``case_ids`` (only those are read), previewed."""
    if not case_ids:
        return {}
    rows = con.execute(
        f"SELECT case_id, max(turn_index) FILTER (WHERE surface IS NOT NULL), "
        f"{preview_sql('arg_max(surface, turn_index)')} FROM transcripts WHERE {RUN_MATCH} "
        "AND coalesce(sample_index, 0) = 0 AND case_id IN (SELECT unnest(?)) GROUP BY case_id",
        [*ref.params(), case_ids],
    ).fetchall()
    return {
        str(case_id): preview(shown, length, TextRef(ref.run_id, ref.series, str(case_id), 0, turn))
        or Preview("", 0)
        for case_id, turn, shown, length in rows
    }


def turn_surfaces(
    con: duckdb.DuckDBPyConnection, ref: RunRef, items: list[tuple[str, int, str]]
) -> dict[tuple[str, int, str], Preview]:
    """The surface of each failing turn (case id, turn index, predicate) of ``items``, in the
    first sample where that predicate failed there (only those turns are read), previewed."""
    if not items:
        return {}
    cases, turns, predicates = (list(column) for column in zip(*items, strict=True))
    rows = con.execute(
        f"""
        WITH wanted AS (SELECT unnest(?) AS case_id, unnest(?) AS turn_index, unnest(?) AS predicate),
             failed AS (SELECT case_id, turn_index, predicate, min(coalesce(sample_index, 0)) AS sample
                        FROM turn_verdicts SEMI JOIN wanted USING (case_id, turn_index, predicate)
                        WHERE {RUN_MATCH} AND passed = false GROUP BY ALL),
             turns AS (SELECT case_id, turn_index, coalesce(sample_index, 0) AS sample, surface
                       FROM transcripts WHERE {RUN_MATCH} AND case_id IN (SELECT unnest(?)))
        SELECT f.case_id, f.turn_index, f.predicate, f.sample, {preview_sql("t.surface")}
        FROM failed f JOIN turns t USING (case_id, turn_index, sample)
        """,
        [cases, turns, predicates, *ref.params(), *ref.params(), sorted(set(cases))],
    ).fetchall()
    return {
        (str(case_id), int(turn), str(predicate)): preview(
            shown, length, TextRef(ref.run_id, ref.series, str(case_id), int(sample), int(turn))
        )
        or Preview("", 0)
        for case_id, turn, predicate, sample, shown, length in rows
    }


def _has_transcripts(con: duckdb.DuckDBPyConnection, ref: RunRef) -> bool:
    row = con.execute(f"SELECT count(*) FROM transcripts WHERE {RUN_MATCH}", ref.params()).fetchone()
    return bool(row and row[0])
