"""A lane's grid: cases × runtime targets, filtered and searched in the query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import duckdb

from eval_pipeline.history.runs import RunRef, latest_runs, ref_from_row
from eval_pipeline.outcome import BLOCKING_SEVERITIES
from eval_pipeline.viewer.links import TextRef
from eval_pipeline.viewer.pages.common import (
    NotFound,
    Preview,
    page_count,
    preview,
    preview_sql,
)

GRID_PAGE_ROWS = 50  # cases a grid page shows
GridFilter = Literal["", "failing", "disagree"]
GRID_FILTERS: dict[str, str] = {
    "": "every case",
    "failing": "failing anywhere",
    "disagree": "runtimes disagree",
}


@dataclass(frozen=True)
class GridCell:
    verdict: str
    surface: Preview | None


@dataclass(frozen=True)
class PassRate:
    """Of the grid's cases a run has a verdict for, how many pass there (every case, not a page)."""

    passing: int
    cases: int

    @property
    def share(self) -> float | None:
        return self.passing / self.cases if self.cases else None


@dataclass(frozen=True)
class GridPage:
    lane: str
    split: str
    splits: list[str]
    runs: list[RunRef]  # one column per runtime target: the latest run of its series
    rows: list[tuple[str, list[GridCell | None]]]  # case id, a cell per run (None: not in that run)
    prompts: dict[str, Preview]  # each shown case's prompt: its probe turn's (else first turn's)
    pass_rates: list[PassRate]  # one per run, over every case of the grid
    predicates: list[str]  # the predicates that failed in some run: one filter each
    filter: str
    query: str
    predicate: str  # "": every predicate; else only cases where it failed in some run
    matching: int  # cases that pass the filter and search, all pages
    page: int
    pages: int


# A case's verdict in one run, from its sample-0 case predicates, as SQL over (passed, severity).
_CASE_VERDICT_SQL = f"""
    CASE WHEN bool_or(passed = false AND severity IN ({", ".join(f"'{s}'" for s in BLOCKING_SEVERITIES)})) THEN 'fail'
         WHEN bool_or(passed = false) THEN 'warn'
         WHEN bool_or(passed) THEN 'pass' ELSE 'n/a' END
"""


# What the grid reads of a stored outcome's failing items.
_ITEM_JSON = '[{"predicate": "VARCHAR", "severity": "VARCHAR", "turn_index": "INTEGER"}]'


def grid_page(
    con: duckdb.DuckDBPyConnection,
    lane: str,
    split: str | None = None,
    *,
    filter: str = "",
    query: str = "",
    predicate: str = "",
    page: int = 1,
) -> GridPage:
    """Cases × runtime targets of one lane split: the latest run of each runtime's series of the
    split's own cases. ``filter`` ``failing`` keeps cases that fail or warn in any run,
    ``disagree`` those with a case predicate whose verdict differs between the runs; ``query``
    keeps cases whose id, a prompt or a surface contains it (case-insensitive); ``predicate``
    keeps cases where that predicate failed in some run. All of it in one query, which returns
    page ``page`` only, each run's pass rate over the grid's cases and the predicates that failed
    somewhere; then the surfaces and prompts of the cases shown."""
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
    predicate = predicate.strip()
    found = _grid_rows(con, runs, filter, query.strip(), predicate, page)
    rows = found.rows
    cells, prompts = _grid_cells(con, runs, [case for case, _ in rows])
    table: list[tuple[str, list[GridCell | None]]] = []
    for case_id, verdicts in rows:
        line: list[GridCell | None] = [None] * len(runs)
        for col, word in verdicts.items():
            line[col] = GridCell(word, cells.get((case_id, col)))
        table.append((case_id, line))
    return GridPage(
        lane,
        split,
        splits,
        runs,
        table,
        prompts,
        [found.pass_rates.get(col, PassRate(0, 0)) for col in range(len(runs))],
        found.predicates,
        filter,
        query.strip(),
        predicate,
        found.matching,
        page,
        page_count(found.matching, GRID_PAGE_ROWS),
    )


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


@dataclass(frozen=True)
class _GridRows:
    rows: list[tuple[str, dict[int, str]]]  # the page's cases, each run's verdict by column
    matching: int
    pass_rates: dict[int, PassRate]
    predicates: list[str]


def _verdicts_sql(runs_where: str, column: str) -> str:
    """The grid's verdicts as SQL common table expressions: ``cp``, each case's predicate rows in
    each run's column (case rows; for a case judged per turn, each predicate over its turns, its
    severity as the run's outcome lists it), ``by_predicate`` (whether the runs disagree on the
    case) and ``by_run`` (the case's verdict in each column)."""
    return f"""
case_rows AS (
        SELECT case_id, predicate, passed, severity, {column} AS col FROM case_predicates
        WHERE {runs_where} AND lane = $lane AND split = $split AND case_set = $split
          AND coalesce(sample_index, 0) = 0
    ),
    turn_severity AS (  -- a predicate judged per turn: its severity, as the run's outcome lists it
        SELECT DISTINCT {column} AS col, item.predicate AS predicate, item.severity AS severity
        FROM (SELECT run_id, runtime, unnest(from_json(json_extract(outcome, '$.failing'), '{_ITEM_JSON}')) AS item
              FROM run_manifests WHERE {runs_where} AND lane = $lane)
        WHERE item.turn_index IS NOT NULL
    ),
    turn_rows AS (  -- a case judged per turn (no case rows): each predicate over its turns
        SELECT t.case_id, t.predicate, bool_and(t.passed) AS passed,
               coalesce(any_value(s.severity), 'report') AS severity, t.col
        FROM (SELECT case_id, predicate, passed, {column} AS col FROM turn_verdicts
              WHERE {runs_where} AND lane = $lane AND split = $split AND case_set = $split
                AND coalesce(sample_index, 0) = 0) t
        LEFT JOIN turn_severity s USING (col, predicate)
        WHERE (t.case_id, t.col) NOT IN (SELECT case_id, col FROM case_rows)
        GROUP BY t.case_id, t.predicate, t.col
    ),
    cp AS (SELECT * FROM case_rows UNION ALL SELECT * FROM turn_rows),
    by_predicate AS (
        SELECT case_id,
               bool_or(min(coalesce(passed::INT, 2)) <> max(coalesce(passed::INT, 2)) OR count(*) < $runs)
                   OVER (PARTITION BY case_id) AS disagrees
        FROM cp GROUP BY case_id, predicate
        QUALIFY row_number() OVER (PARTITION BY case_id) = 1
    ),
    by_run AS (SELECT case_id, col, {_CASE_VERDICT_SQL} AS verdict FROM cp GROUP BY case_id, col),
    """


def _grid_rows(
    con: duckdb.DuckDBPyConnection, runs: list[RunRef], filter: str, query: str, predicate: str, page: int
) -> _GridRows:
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
    failed_predicate = (
        "AND case_id IN (SELECT case_id FROM cp WHERE predicate = $predicate AND passed = false)"
        if predicate
        else ""
    )
    result = con.execute(
        f"""
        WITH {_verdicts_sql(runs_where, column)}
        rates AS (  -- each run's pass rate over every case of the grid, whatever the page shows
            SELECT list({{'col': col, 'passing': passing, 'cases': cases}}) AS rates
            FROM (SELECT col, count(*) FILTER (WHERE verdict = 'pass') AS passing, count(*) AS cases
                  FROM by_run GROUP BY col)
        ),
        failed AS (SELECT list(DISTINCT predicate ORDER BY predicate) AS predicates FROM cp WHERE passed = false),
        by_case AS (
            SELECT case_id, list(verdict ORDER BY col) AS verdicts, list(col ORDER BY col) AS cols
            FROM by_run JOIN by_predicate USING (case_id)
            WHERE true {search} {failed_predicate}
            GROUP BY case_id
            HAVING {conditions[filter]}
        ),
        shown AS (
            SELECT case_id, verdicts, cols, count(*) OVER () AS matching FROM by_case
            ORDER BY case_id LIMIT $limit OFFSET $offset
        )
        -- one row even when no case matches, so the rates and predicates always arrive
        SELECT rates.rates, failed.predicates, shown.case_id, shown.verdicts, shown.cols, shown.matching
        FROM rates CROSS JOIN failed LEFT JOIN shown ON true
        ORDER BY shown.case_id
        """,
        {
            **params,
            "lane": lane,
            "split": split,
            "runs": len(runs),
            "limit": GRID_PAGE_ROWS,
            "offset": (max(page, 1) - 1) * GRID_PAGE_ROWS,
            **({"query": query} if query else {}),
            **({"predicate": predicate} if predicate else {}),
        },
    ).fetchall()
    rates, predicates = (result[0][0] or [], result[0][1] or []) if result else ([], [])
    shown = [row for row in result if row[2] is not None]
    return _GridRows(
        [(str(case), dict(zip(cols, verdicts, strict=True))) for _, _, case, verdicts, cols, _ in shown],
        int(shown[0][5]) if shown else 0,
        {int(r["col"]): PassRate(int(r["passing"]), int(r["cases"])) for r in rates},
        [str(p) for p in predicates],
    )


def _grid_cells(
    con: duckdb.DuckDBPyConnection, runs: list[RunRef], case_ids: list[str]
) -> tuple[dict[tuple[str, int], Preview], dict[str, Preview]]:
    """The last surface of each shown case in each run, and each shown case's prompt: its probe
    turn's (the turn its predicates judge), else its first turn's, from the first run holding it;
    each previewed."""
    if not case_ids:
        return {}, {}
    runs_where, column, params = _runs_sql(runs)
    prompt_order = "(CASE WHEN role = 'probe' THEN 0 ELSE 1 END, turn_index)"
    rows = con.execute(
        f"SELECT case_id, {column} AS col, max(turn_index) FILTER (WHERE surface IS NOT NULL), "
        f"{preview_sql('arg_max(surface, turn_index)')}, "
        f"arg_min(turn_index, {prompt_order}) FILTER (WHERE prompt IS NOT NULL), "
        f"{preview_sql(f'arg_min(prompt, {prompt_order})')} FROM transcripts "
        f"WHERE {runs_where} AND lane = $lane AND split = $split AND case_set = $split "
        "AND coalesce(sample_index, 0) = 0 AND case_id IN (SELECT unnest($cases)) GROUP BY case_id, col "
        "ORDER BY col",
        {**params, "lane": runs[0].lane, "split": runs[0].split, "cases": case_ids},
    ).fetchall()
    surfaces: dict[tuple[str, int], Preview] = {}
    prompts: dict[str, Preview] = {}
    for case, col, turn, shown, length, prompt_turn, prompt, prompt_length in rows:
        run = runs[int(col)]
        surfaces[(str(case), int(col))] = preview(
            shown, length, TextRef(run.run_id, run.series, str(case), 0, turn)
        ) or Preview("", 0)
        text = preview(
            prompt, prompt_length, TextRef(run.run_id, run.series, str(case), 0, prompt_turn, "prompt")
        )
        if text is not None:
            prompts.setdefault(str(case), text)
    return surfaces, prompts
