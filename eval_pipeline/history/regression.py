"""The regression check: is this run significantly worse than the previous run of its series?

Pure function of the history root and the current run's tables; the Dagster history asset
calls :func:`find_regressions` and reports the findings as the WARN check ``no_regression``.

The test is **paired**: this run against the latest committed run of the same series (lane,
split, runtime, case set), on the cases both evaluated, from each run's case verdicts
(:mod:`eval_pipeline.history.verdicts`) of the rows each rate counts, as the lane declares it
(:mod:`eval_pipeline.lanes.metric_rows`); a rate over turns, and ``error_rate``, on the turns
both runs judged (:func:`eval_pipeline.history.pairs.paired_turns`: same case, sample and turn).
A rate **regressed** when

- it is significantly worse at the lane's ``regression_alpha`` (default 0.05): with one
  verdict per case a side, the one-sided exact McNemar p-value (the cases that went the bad
  way against those that went the good way); with several (repeats, turns: clustered), McNemar
  does not apply and the one-sided clustered bootstrap p-value decides (whole cases resampled,
  :func:`eval_pipeline.metrics.paired.bootstrap_worse_p_value`); or
- its threshold is pinned (``== 1``, ``== 0``) and any case (for a rate over turns, any
  paired turn) went the bad way.

On 15 cases, one case going pass→fail is not significant (p = 0.5) unless the rate is pinned;
nine are (p = 0.002). A rate over turns whose runs' history holds no turn verdicts (runs
written before they were kept; for ``error_rate``, no transcripts) is not tested, and says
which run; so are the counts. A pinned one of those regressed when it held its pin last time
and no longer does.

A ``--cases`` run (case set ``custom-<hash>``) is never compared with the nightly series, nor
the other way round. When the series' case files changed between the two runs
(``cases_sha256`` differs), nothing is flagged: each note says "case set changed" and
``flipped_case_ids`` lists the pass→fail flips on the cases both runs share.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial

import duckdb
import pandas as pd

from eval_pipeline.core import SERIES_MATCH, Series
from eval_pipeline.history.pairs import (
    TRANSCRIPTS,
    TURN_VERDICTS,
    CaseCounts,
    holds_run,
    missing_turns_note,
    paired_turns,
    per_case_counts,
    turn_source,
)
from eval_pipeline.history.runs import RUN_MATCH, RunRef, is_missing, ref_from_row
from eval_pipeline.history.verdicts import RUN_KEYS, flipped, side_by_side
from eval_pipeline.history.views import connect, scope_to_run
from eval_pipeline.lanes.metric_rows import MetricRows, higher_is_better, is_pinned, rows_of_metric
from eval_pipeline.metrics import ALPHA, bootstrap_deltas, bootstrap_worse_p_value, mcnemar_one_sided
from eval_pipeline.tables import StageFile

FINDING_COLUMNS = [
    "metric",
    "value",
    "previous_value",
    "previous_run_id",
    "delta",
    "cases",
    "turns",
    "worse",
    "better",
    "p_value",
    "regressed",
    "flipped_case_ids",
    "note",
]
CASE_PREDICATES = "case_predicates"
# The current run's rows the findings read, per history table: its case verdicts, and the turn
# rows a paired test over turns reads. A finding never reads a verdict's code: it is left null.
_CURRENT_COLUMNS = {
    CASE_PREDICATES: ("case_id", "predicate", "passed", "severity", "sample_index"),
    TURN_VERDICTS: ("case_id", "sample_index", "turn_index", "predicate", "passed"),
    TRANSCRIPTS: ("case_id", "sample_index", "turn_index", "error"),
}
_NULL_COLUMNS = {CASE_PREDICATES: ("code",)}


@dataclass(frozen=True)
class MetricFinding:
    """One metric of the current run against the previous run of the same series."""

    metric: str
    value: float | None
    note: str
    previous_value: float | None = None
    previous_run_id: str | None = None
    delta: float | None = None  # value - previous_value
    cases: int | None = None  # common cases tested (None: not tested)
    turns: int | None = None  # a rate over turns: the paired turns tested (worse, better count turns)
    worse: int | None = None  # common cases (turns) that went the bad way on this metric
    better: int | None = None  # … and the good way
    p_value: float | None = None  # one-sided: that this run is worse (None: not tested)
    regressed: bool = False
    flipped_case_ids: tuple[str, ...] = ()  # the cases that went the bad way


def find_regressions(
    history: str | duckdb.DuckDBPyConnection,
    *,
    series: Series,
    metrics: pd.DataFrame,
    case_predicates: pd.DataFrame | StageFile,
    metric_rows: Mapping[str, MetricRows],
    turn_verdicts: pd.DataFrame | StageFile | None = None,
    transcripts: pd.DataFrame | StageFile | None = None,
    alpha: float = ALPHA,
) -> list[MetricFinding]:
    """Per-metric findings for the current run: its ``metrics`` table and its ``case_predicates``
    (at least ``case_id``, ``predicate``, ``passed``, ``severity``; ``sample_index`` with
    repeats), against the previous run of the series (module docstring). Its rates over turns
    read its ``turn_verdicts`` (``case_id``, ``sample_index``, ``turn_index``, ``predicate``,
    ``passed``: the turn predicates) and ``error_rate`` its ``transcripts`` (``case_id``,
    ``sample_index``, ``turn_index``, ``error``); left out, those rates are not tested. Each
    table is a frame or the run's stage file, which DuckDB reads where it lies (a run's case
    predicates are never loaded whole, and not read at all for a series' first run).

    ``history`` is the history root, or an open connection to it (:func:`connect`). Given the
    root, the connection it opens reads the previous run's files only (:func:`scope_to_run`),
    not every file of the lane.
    The previous run is the latest committed run of the series other than the current run (the
    ``run_id`` column of ``metrics``, if any) that started before it (when ``metrics`` has
    ``started_at``). With no previous run every finding says so.
    """
    stored_run_id = _single(metrics, "run_id")
    run_id = None if stored_run_id is None else str(stored_run_id)
    current = RunRef(run_id or "current", series)
    with (
        connect(history, lane=series.lane, tables=())
        if isinstance(history, str)
        else nullcontext(history) as con
    ):
        previous = _previous_run(con, series, run_id, _single(metrics, "started_at"))
        if previous is None:
            return [_first_run(row) for _, row in metrics.iterrows()]
        if isinstance(history, str):
            scope_to_run(con, history, previous)
        before = {
            str(row["metric"]): row
            for _, row in con.execute(
                f"SELECT metric, value FROM metrics WHERE {RUN_MATCH}", previous.params()
            )
            .df()
            .iterrows()
        }
        current_sha = _single(metrics, "cases_sha256")
        case_set_changed = not is_missing(current_sha) and previous.cases_sha256 not in (None, current_sha)
        with (
            _current_rows(con, current, {CASE_PREDICATES: case_predicates}) as registered,
            side_by_side(con, previous, current, source_b=str(registered[CASE_PREDICATES])) as sides,
        ):
            if case_set_changed:
                went_bad = flipped(con, sides, common_cases_only=True, worse_only=True)
                ids = tuple(sorted(set(went_bad["case_id"].astype(str))))
                return [
                    _case_set_changed(row, before.get(str(row["metric"])), previous, ids)
                    for _, row in metrics.iterrows()
                ]
            with _current_rows(
                con, current, {TURN_VERDICTS: turn_verdicts, TRANSCRIPTS: transcripts}
            ) as sources:
                pairs = _Pairs(con, previous, current, sides, sources)
                return [
                    _finding(
                        row,
                        before.get(str(row["metric"])),
                        pairs,
                        rows_of_metric(metric_rows, str(row["metric"])),
                        alpha,
                    )
                    for _, row in metrics.iterrows()
                ]


@dataclass(frozen=True)
class _Pairs:
    """What a finding pairs: the previous run, the current one, the table of both runs' case
    verdicts side by side, and where the current run's turn rows are (None: not given)."""

    con: duckdb.DuckDBPyConnection
    previous: RunRef
    current: RunRef
    sides: str
    current_turns: Mapping[str, str | None]
    _held: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False)

    def holds(self, source: str, ref: RunRef) -> bool:
        """Whether ``source`` holds rows of ``ref`` (:func:`holds_run`), asked once per run and
        source: every rate over turns of a table asks the same."""
        key = (source, ref.run_id)
        if key not in self._held:
            self._held[key] = holds_run(self.con, source, ref)
        return self._held[key]


@contextmanager
def _current_rows(
    con: duckdb.DuckDBPyConnection, current: RunRef, given: Mapping[str, pd.DataFrame | StageFile | None]
) -> Iterator[dict[str, str | None]]:
    """The current run's rows of each history table in ``given`` as a relation of ``con`` (its
    name, by table; None: not given), with the run's keys and the table's :data:`_CURRENT_COLUMNS`;
    a stage file is read by DuckDB where it lies, never loaded whole."""
    names: dict[str, str | None] = {}
    keys = dict(zip(RUN_KEYS.split(", "), current.params(), strict=True))
    try:
        for table, rows in given.items():
            if rows is None:
                names[table] = None
                continue
            name, columns, nulls = f"_current_{table}", _CURRENT_COLUMNS[table], _NULL_COLUMNS.get(table, ())
            if isinstance(rows, StageFile):
                literals = [f"{_sql_text(value)} AS {key}" for key, value in keys.items()]
                literals += [f"NULL::VARCHAR AS {column}" for column in nulls]
                con.execute(
                    f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {', '.join([*columns, *literals])} "
                    f"FROM read_parquet({_sql_text(str(rows.path))})"
                )
            else:
                frame = rows.reindex(columns=list(columns)).assign(**keys, **dict.fromkeys(nulls))
                con.register(name, frame)
            names[table] = name
        yield names
    finally:
        for table, registered in names.items():
            if registered is None:
                continue
            if isinstance(given[table], StageFile):
                con.execute(f"DROP VIEW IF EXISTS {registered}")
            else:
                con.unregister(registered)


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def findings_frame(findings: list[MetricFinding]) -> pd.DataFrame:
    rows = [{name: getattr(f, name) for name in FINDING_COLUMNS} for f in findings]
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


def regression_sentence(findings: Sequence[MetricFinding]) -> str:
    """``2 metric(s) regressed vs 71afd00d: a (9 worse, 0 better of 15, p = 0.001953), b (…)``:
    what the check's description says (the CLI prints it), and the report."""
    regressed = [f for f in findings if f.regressed]
    if not regressed:
        return "no metric regressed"
    what = ", ".join(_counts_text(f) if f.cases is not None else f"{f.metric} ({f.note})" for f in regressed)
    previous = str(regressed[0].previous_run_id)[:8]  # the prefix tables show; metadata has it whole
    return f"{len(regressed)} metric(s) regressed vs {previous}: {what}"


def _counts_text(f: MetricFinding) -> str:
    p = "" if f.p_value is None else f", p = {f.p_value:.4g}"
    if f.turns is not None:
        return (
            f"{f.metric} ({f.worse} turns worse, {f.better} better of {f.turns} turns in {f.cases} cases{p})"
        )
    return f"{f.metric} ({f.worse} worse, {f.better} better of {f.cases}{p})"


def _first_run(row: pd.Series) -> MetricFinding:
    return MetricFinding(str(row["metric"]), _number(row.get("value")), "no previous run of this series")


def _case_set_changed(
    row: pd.Series, before: pd.Series | None, previous: RunRef, went_bad: tuple[str, ...]
) -> MetricFinding:
    """A finding when the series' case files changed: reported, not compared (module docstring)."""
    note = (
        f"case set changed since {previous.run_id} (case files differ): not comparable; "
        f"{len(went_bad)} case(s) went pass→fail among the common cases"
    )
    return MetricFinding(
        str(row["metric"]),
        _number(row.get("value")),
        note,
        previous_value=None if before is None else _number(before["value"]),
        previous_run_id=previous.run_id,
        flipped_case_ids=went_bad,
    )


def _finding(
    row: pd.Series,
    before: pd.Series | None,
    pairs: _Pairs,
    rows: MetricRows | None,
    alpha: float,
) -> MetricFinding:
    metric, value = str(row["metric"]), _number(row.get("value"))
    previous = pairs.previous
    if before is None:
        return MetricFinding(metric, value, "new metric", previous_run_id=previous.run_id)
    previous_value = _number(before["value"])
    delta = None if value is None or previous_value is None else value - previous_value
    found = partial(
        MetricFinding,
        metric,
        value,
        previous_value=previous_value,
        previous_run_id=previous.run_id,
        delta=delta,
    )
    op, threshold = row.get("threshold_op"), _number(row.get("threshold"))
    up, pinned = higher_is_better(rows, op, threshold), is_pinned(op, threshold)
    untested = _why_untested(pairs, rows)
    if untested is not None:
        if not pinned or threshold is None or value is None or previous_value is None:
            return found(untested)
        if threshold == previous_value and value != previous_value:
            return found(
                f"{untested}; pinned at {threshold:g}: held it in {previous.run_id}, not now", regressed=True
            )
        return found(
            f"{untested}; pinned at {threshold:g}: {previous_value:g} in {previous.run_id}, {value:g} now"
        )
    assert rows is not None
    turns: int | None = None
    if rows.over == "turns":
        table = turn_source(rows)
        paired = paired_turns(pairs.con, previous, pairs.current, rows, source_b=pairs.current_turns[table])
        counts: CaseCounts = paired.counts
        turns = paired.turns
        worse, better, worse_ids = paired.went_worse(up)
        unit = "turns"
    else:
        counts = per_case_counts(pairs.con, pairs.sides, rows).applicable_on_both()
        worse_ids = counts.went_worse(up)
        worse, better, unit = len(worse_ids), len(counts.went_worse(not up)), "cases"
    if not len(counts.case_ids):
        return found(f"not tested: no common {unit[:-1]} has a verdict", cases=0, worse=0, better=0)
    if counts.one_verdict_each:  # as compare decides: one verdict per case a side is a 2×2 table
        p = mcnemar_one_sided(worse, better)
        how = f"one-sided exact McNemar p = {p:.4g}"
    else:
        deltas = bootstrap_deltas(*counts.arrays())
        p = bootstrap_worse_p_value(deltas, higher_is_better=up)
        how = f"clustered: bootstrap over cases, one-sided p = {p:.4g}"
    significant = p < alpha
    regressed = significant or (pinned and worse > 0)
    why = (
        "significantly worse"
        if significant
        else f"pinned at {threshold:g} and {worse} {unit[:-1]}(s) went the bad way"
        if regressed
        else "not significantly worse"
    )
    n = len(counts.case_ids)
    of = f"of {turns} turns in {n} cases" if turns is not None else f"of {n}"
    return found(
        f"{why} vs {previous.run_id} ({worse} worse, {better} better {of}; {how}, α = {alpha:g})",
        cases=n,
        turns=turns,
        worse=worse,
        better=better,
        p_value=p,
        regressed=regressed,
        flipped_case_ids=tuple(worse_ids),
    )


def _why_untested(pairs: _Pairs, rows: MetricRows | None) -> str | None:
    """Why a metric cannot be tested paired (None: it can): not a rate, or a rate over turns
    whose rows one of the runs lacks."""
    if rows is None:
        return "not tested: no case verdicts in history"
    if rows.over == "cases":
        return None
    table = turn_source(rows)
    if not pairs.holds(table, pairs.previous):
        return missing_turns_note(table, pairs.previous.run_id)
    current = pairs.current_turns[table]
    if current is None or not pairs.holds(current, pairs.current):
        return missing_turns_note(table, pairs.current.run_id)
    return None


def _previous_run(
    con: duckdb.DuckDBPyConnection,
    series: Series,
    run_id: str | None,
    started_at: object,
) -> RunRef | None:
    started = None if is_missing(started_at) else pd.Timestamp(str(started_at))
    rows = con.execute(
        f"SELECT * FROM run_order WHERE {SERIES_MATCH} "
        "AND (? IS NULL OR run_id <> ?) AND (?::TIMESTAMPTZ IS NULL OR started_at < ?::TIMESTAMPTZ) "
        "ORDER BY seq DESC LIMIT 1",
        [*series.params(), run_id, run_id, started, started],
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
