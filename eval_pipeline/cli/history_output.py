"""What the history commands (:mod:`eval_pipeline.cli.history`) read and print: tables fitted
to the terminal, CSV or JSON, from the history views."""

from __future__ import annotations

import json
import webbrowser
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, fields
from datetime import date
from pathlib import Path

import duckdb
import pandas as pd
import typer
from rich import box
from rich.cells import cell_len
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from eval_pipeline.cli.arguments import OutputFormat, local_folder
from eval_pipeline.cli.common import EXIT_BAD_INPUT, bad_input_exits, err, out, run_title, short_id
from eval_pipeline.cli.terminal import FittedTable, fit, record_heading, terminal_view
from eval_pipeline.core import SERIES_SQL, history_root
from eval_pipeline.history import connect
from eval_pipeline.history.compact import CompactedMonth, compact
from eval_pipeline.history.compare import latest_pair
from eval_pipeline.history.comparison import RunComparison, compare_as_declared
from eval_pipeline.history.diff import diff_pairs, pairs_to_diff
from eval_pipeline.history.first_failure import FIRST_FAILURE_COLUMNS as ALL_FIRST_FAILURE_COLUMNS
from eval_pipeline.history.first_failure import CaseScope, case_series, first_failures
from eval_pipeline.history.flaky import case_flip_rates, rate_intervals
from eval_pipeline.history.runs import RunRef, is_missing
from eval_pipeline.history.sql import read_only_connection, run_query
from eval_pipeline.metrics import number_text, verdict_word
from eval_pipeline.report import rich_style
from eval_pipeline.runtimes.names import decoded_runtimes
from eval_pipeline.viewer.pages.common import decoded_names, words, worst

_HISTORY_COLUMNS = (
    "date, started_at, lane, split, runtime, case_set, run_id, metric, value, threshold_op, threshold, "
    "severity, passed, verdict"
)
HISTORY_TABLE_COLUMNS = (
    "date",
    "lane",
    "split",
    "runtime",
    "case_set",
    "run_id",
    "metric",
    "value",
    "threshold",
    "check",
)
NO_RUNS = "no runs yet (eval-pipeline run makes one)"
VERDICT_COLUMNS = frozenset({"check", "verdict", "verdict_a", "verdict_b"})  # coloured like the report
DIFF_METRIC_COLUMNS = ("metric", "value_a", "value_b", "delta")
# A flipped case predicate: each side's code, with its pass counts when a run has repeats, and
# both surfaces (prose: wrapped under the row).
FLIP_VIEW_COLUMNS = ("case_id", "predicate", "change", "a", "b", "surface_a", "surface_b")
FLAKY_CASE_COLUMNS = ("lane", "split", "runtime", "case_set", "case_id", "predicate", "flips", "alternations")
FLAKY_RATE_COLUMNS = ("lane", "split", "runtime", "case_set", "metric", "value", "wilson_low", "wilson_high")
# Without --wide: everything but the previous run's day and the two surfaces (their change says it).
FIRST_FAILURE_COLUMNS = tuple(
    c for c in ALL_FIRST_FAILURE_COLUMNS if c not in ("previous_date", "surface_before", "surface_after")
)


def print_history(
    *,
    lane: str | None,
    metric: str | None,
    since: str | None,
    sql: str | None,
    output: OutputFormat,
    root: str | None,
    wide: bool,
    metrics: bool = False,
) -> None:
    """One line per stored run; with ``metric`` or ``metrics`` its metric values; or the result
    of ``sql`` (the ``history`` command)."""
    if sql is not None:
        with _bad_query_exits(), read_only_connection(root or history_root()) as con:
            rows = run_query(con, sql)
        emit(rows, output, title="history")
        return
    if metric is None and not metrics:
        _print_runs(lane=lane, since=since, output=output, root=root, wide=wide)
        return
    with _bad_query_exits(), connect(root or history_root()) as con:
        since_day = _parse_day(since) if since else None
        rows = con.execute(
            f"SELECT {_HISTORY_COLUMNS} FROM metrics WHERE (? IS NULL OR lane = ?) AND (? IS NULL OR metric = ?) "
            "AND (?::DATE IS NULL OR date >= ?::DATE) "
            "ORDER BY started_at, date, lane, split, runtime, case_set, run_id, metric",
            [lane, lane, metric, metric, since_day, since_day],
        ).df()
    if output is OutputFormat.table:
        rows = rows.assign(
            threshold=[
                "" if pd.isna(t) else f"{op} {t:g}"
                for op, t in zip(rows["threshold_op"], rows["threshold"], strict=True)
            ],
            check=[
                str(v)
                if isinstance(v, str)
                else verdict_word(None if pd.isna(p) else bool(p), None if pd.isna(s) else str(s))
                for v, p, s in zip(rows["verdict"], rows["passed"], rows["severity"], strict=True)
            ],
        )
    emit(rows, output, title="history", columns=HISTORY_TABLE_COLUMNS, wide=wide)


def _print_runs(
    *, lane: str | None, since: str | None, output: OutputFormat, root: str | None, wide: bool
) -> None:
    """Every committed lane run, oldest first, a line each: its day, id, verdict (the worst of its
    checks'), series and the checks that did not pass; then what each derived runtime name
    stands for. CSV and JSON carry every column (the spec too) instead."""
    with _bad_query_exits(), connect(root or history_root()) as con:
        since_day = _parse_day(since) if since else None
        rows = con.execute(
            "SELECT r.date, r.started_at, r.lane, r.split, r.runtime, r.case_set, r.run_id, r.runtime_spec, "
            "r.runtime_options::VARCHAR AS runtime_options, "
            "list(m.verdict) FILTER (WHERE m.verdict IS NOT NULL) AS verdicts, "
            "list(m.metric ORDER BY m.metric) FILTER (WHERE m.verdict IN ('fail', 'warn', 'void')) AS failing "
            f"FROM runs r LEFT JOIN metrics m USING (run_id, {SERIES_SQL}) "
            "WHERE (? IS NULL OR r.lane = ?) AND (?::DATE IS NULL OR r.date >= ?::DATE) "
            "GROUP BY ALL ORDER BY r.started_at, r.date, r.lane, r.split, r.runtime, r.case_set, r.run_id",
            [lane, lane, since_day, since_day],
        ).df()
    rows = rows.assign(
        verdict=[worst(words(v)) for v in rows["verdicts"]],
        failing=[", ".join(words(f)) for f in rows["failing"]],
    ).drop(columns=["verdicts"])
    if output is not OutputFormat.table or rows.empty:
        emit(rows, output, title="runs", empty=NO_RUNS)
        return
    console = out()
    console.print(Text("runs, oldest first: day · run · verdict · series · failing checks", style="italic"))
    for record in _records(rows):
        verdict = str(record["verdict"])
        series = run_title(
            str(record["lane"]), str(record["split"]), str(record["runtime"]), str(record["case_set"])
        )
        run_id = str(record["run_id"]) if wide else short_id(str(record["run_id"]))
        line = Text.assemble(
            f"{record['date']}  {run_id}  ", (f"{verdict:<4}", rich_style(verdict)), f"  {series}"
        )
        failing = str(record["failing"] or "")
        if failing and cell_len(f"{line.plain}  {failing}") <= console.width:
            line.append(f"  {failing}")
            failing = ""
        console.print(line, highlight=False)
        if failing:  # under its run, indented past the day and id, wrapped between names
            console.print(Padding(Text(failing), (0, 0, 0, len(line.plain) - len(series))), highlight=False)
    decoded = decoded_runtimes(
        zip(rows["runtime"], rows["runtime_spec"], rows["runtime_options"], strict=True)
    )
    for name, stands_for in decoded.items():  # a derived name says nothing of what it ran
        console.print(Text(f"{name}: {stands_for}"), highlight=False, soft_wrap=True)


def print_compacted(*, month: str | None, root: str | None, output: OutputFormat, wide: bool) -> None:
    """Compact a month (``history compact``) and print what was rewritten: a table fitted to the
    terminal (what every row shares goes to its title) unless ``wide``."""
    with _bad_query_exits():
        done = compact(root or history_root(), month)
    shown = [f.name for f in fields(CompactedMonth) if f.name != "path"]  # every field but where it wrote
    rows = pd.DataFrame([asdict(d) for d in done], columns=shown).rename(columns={"runs_total": "runs"})
    emit(rows, output, title="compacted", empty="nothing to compact", wide=wide)


def print_diff(
    *,
    run_a: str | None,
    run_b: str | None,
    lane: str | None,
    output: OutputFormat,
    root: str | None,
    wide: bool,
) -> None:
    """The ``diff`` command: metric deltas and flipped cases between two runs of each series."""
    with _bad_query_exits(), connect(root or history_root()) as con:
        diffs = diff_pairs(con, pairs_to_diff(con, run_a, run_b, lane=lane))
        decoded = decoded_names(con, [ref.runtime for d in diffs for ref in (d.a, d.b)])
    if output is OutputFormat.table:
        if not diffs:
            out().print("No series has two runs yet.")
        for d in diffs:
            a, b = (d.a.label(), d.b.label()) if wide else (_short_label(d.a), _short_label(d.b))
            out().print(f"[bold]{escape(a)}  →  {escape(b)}[/bold]", highlight=False)
            _print_decoded(decoded, (d.a.runtime, d.b.runtime))
            if d.note:
                out().print(f"[yellow]note:[/yellow] {escape(d.note)}", highlight=False)
            emit(d.metric_deltas, output, title="metrics", columns=DIFF_METRIC_COLUMNS, wide=wide)
            emit(
                _flip_view(d.flips),
                output,
                title="flipped cases",
                empty="no case flipped",
                columns=FLIP_VIEW_COLUMNS,
                wide=wide,
            )
        return
    if output is OutputFormat.json:
        records = [
            {
                "a": d.a.label(),
                "b": d.b.label(),
                "run_a": d.a.run_id,
                "run_b": d.b.run_id,
                "lane": d.b.lane,
                "split": d.b.split,
                "runtime_a": d.a.runtime,
                "runtime_b": d.b.runtime,
                "runtime_a_stands_for": decoded.get(d.a.runtime),
                "runtime_b_stands_for": decoded.get(d.b.runtime),
                "case_set_a": d.a.case_set,
                "case_set_b": d.b.case_set,
                "note": d.note,
                "metrics": _records(d.metric_deltas),
                "flips": _records(d.flips),
            }
            for d in diffs
        ]
        out().print_json(json.dumps(records, default=str))
        return
    flips = [
        d.flips.assign(run_a=d.a.run_id, run_b=d.b.run_id, lane=d.b.lane, split=d.b.split, note=d.note)
        for d in diffs
    ]
    emit(pd.concat(flips, ignore_index=True) if flips else pd.DataFrame(), output, title="flips")


def print_flaky(
    *, lane: str | None, last: int, show_all: bool, output: OutputFormat, root: str | None, wide: bool
) -> None:
    """The ``flaky`` command: cases whose verdicts alternate, and lane rates with intervals."""
    with _bad_query_exits(), connect(root or history_root()) as con:
        cases = case_flip_rates(con, lane=lane, last=last)
        rates = rate_intervals(con, lane=lane, last=last)
        decoded = decoded_names(con, [str(r) for r in rates["runtime"]])
    if not show_all:
        cases = cases[cases["alternations"] > 0].reset_index(drop=True)
    if output is OutputFormat.json:
        out().print_json(json.dumps({"cases": _records(cases), "rates": _records(rates)}, default=str))
        return
    emit(
        cases,
        output,
        title=f"flaky cases: verdicts that alternate (last {last} runs)",
        empty="no case alternated (a case that changed once and stayed: see first-failure)",
        columns=FLAKY_CASE_COLUMNS,
        wide=wide,
    )
    if output is OutputFormat.table:
        emit(
            rates,
            output,
            title="lane rates, 95% Wilson interval on the latest run",
            columns=FLAKY_RATE_COLUMNS,
            wide=wide,
        )
        _print_decoded(decoded, rates["runtime"])


def print_first_failures(
    *,
    case_id: str,
    predicate: str | None,
    lane: str | None,
    split: str | None,
    runtime: str | None,
    output: OutputFormat,
    root: str | None,
    wide: bool,
) -> None:
    """The ``first-failure`` command: per series, the first run a case's predicate failed."""
    scope = CaseScope(case_id, predicate, lane, split, runtime)
    with _bad_query_exits(), connect(root or history_root()) as con:
        series = case_series(con, scope)
        rows = first_failures(con, scope)
        decoded = decoded_names(con, [str(r) for r in rows["runtime"]])
    looked_at = f"{case_id} never failed in {len(series)} series: {', '.join(series)}"
    emit(
        rows,
        output,
        title=f"first failure of {case_id}",
        empty=looked_at,
        columns=FIRST_FAILURE_COLUMNS,
        wide=wide,
    )
    if output is OutputFormat.table:
        _print_decoded(decoded, rows["runtime"])


def print_comparison(
    *,
    runtimes: list[str] | None,
    runs: list[str] | None,
    lane: str | None,
    split: str | None,
    case_set: str | None,
    as_json: bool,
    root: str | None,
    wide: bool,
) -> None:
    """The ``compare`` command: the paired comparison of two runs, then the flipped cases."""
    with _bad_query_exits(), connect(root or history_root()) as con:
        if runtimes and lane is None and not runs:  # the lane of two runs is theirs
            lane = _common_lane(con, runtimes)
        a, b = _runs_to_compare(con, lane, runtimes or [], runs or [], split, case_set)
        result, declared = compare_as_declared(con, a, b)
        decoded = decoded_names(con, [a.runtime, b.runtime])
    if as_json:
        document = result.document()
        for side, ref in (("a", a), ("b", b)):
            document[side]["runtime_stands_for"] = decoded.get(ref.runtime)
        out().print_json(json.dumps(document, default=str))
        return
    out().print(
        f"[bold]{escape(a.lane)}/{escape(a.split)}[/bold] cases {escape(a.case_set)}", highlight=False
    )
    for side, ref in (("A", a), ("B", b)):
        run_id = ref.run_id if wide else short_id(ref.run_id)
        day = ref.date.isoformat() if ref.date else "?"
        stands = f" ({decoded[ref.runtime]})" if ref.runtime in decoded else ""
        out().print(
            Text(f"  {side}: {ref.runtime}{stands}  run {run_id} ({day})"), highlight=False, soft_wrap=True
        )
    if result.note:
        out().print(f"[yellow]note:[/yellow] {escape(result.note)}", highlight=False)
    if not declared:
        out().print(f"[yellow]note:[/yellow] lane {escape(a.lane)!r} is not declared here: nothing is tested")
    for table in _comparison_tables(result):
        out().print(table)
    emit(
        _flip_view(result.flips),
        OutputFormat.table,
        title=f"cases that flipped, A → B ({len(result.flips)}, each once)",
        empty="no case flipped",
        columns=FLIP_VIEW_COLUMNS,
        wide=wide,
    )


def _print_decoded(decoded: dict[str, str], names: Iterable[object]) -> None:
    """What each derived name among ``names`` stands for, a line each (once a name)."""
    for name in dict.fromkeys(str(n) for n in names):
        if name in decoded:  # a derived name says nothing of what it ran
            out().print(Text(f"runtime {name}: {decoded[name]}"), highlight=False, soft_wrap=True)


def write_report_and_open(*, folder: str, root: str | None, open_it: bool) -> None:
    """The ``report`` command: write the static report, say where, and open it if asked."""
    from eval_pipeline.viewer.export import export_report  # the pages' templates load only for `report`

    local_folder(folder, "--out")
    with _bad_query_exits():
        path = export_report(root or history_root(), Path(folder))
    out().print(f"wrote {path}", highlight=False)
    uri = path.resolve().as_uri()
    if open_it and not webbrowser.open(uri):
        err().print(f"no browser could be started; open {uri}", highlight=False, markup=False)


def _common_lane(con: duckdb.DuckDBPyConnection, runtimes: Sequence[str]) -> str:
    """The one lane every named runtime has a committed run of (else bad input, naming the lanes)."""
    lanes = [
        lane
        for (lane,) in con.execute(
            "SELECT lane FROM runs WHERE list_contains(?, runtime) GROUP BY lane "
            "HAVING count(DISTINCT runtime) = len(list_distinct(?)) ORDER BY lane",
            [list(runtimes), list(runtimes)],
        ).fetchall()
    ]
    if len(lanes) == 1:
        return str(lanes[0])
    named = " and ".join(repr(r) for r in dict.fromkeys(runtimes))
    if not lanes:
        raise KeyError(f"compare: no lane has committed runs of both {named}")
    raise KeyError(f"compare: {named} both ran lanes {', '.join(lanes)}: name one with --lane")


def _runs_to_compare(
    con: duckdb.DuckDBPyConnection,
    lane: str | None,
    runtimes: Sequence[str],
    runs: Sequence[str],
    split: str | None,
    case_set: str | None,
) -> tuple[RunRef, RunRef]:
    """``--runtime A --runtime B`` (their latest runs) or ``--run A --run B``, not both."""
    if runs and runtimes:
        raise KeyError("give two --runtime or two --run, not both")
    if not runs:
        if lane is None:
            raise KeyError("give two --runtime (A, then B) or two --run")
        return latest_pair(con, lane=lane, runtimes=runtimes, split=split, case_set=case_set)
    if len(runs) != 2:
        raise KeyError(f"give two runs (--run A --run B), got {list(runs)}")
    pairs = pairs_to_diff(con, runs[0], runs[1], lane=lane)
    chosen = [(x, y) for x, y in pairs if split in (None, x.split)]
    splits = ", ".join(sorted({x.split for x, _ in pairs}))
    if not chosen:
        raise KeyError(f"runs {runs[0]!r} and {runs[1]!r} share no split {split!r}; they share {splits}")
    if len(chosen) > 1:
        raise KeyError(
            f"runs {runs[0]!r} and {runs[1]!r} share several splits, give --split: one of {splits}"
        )
    return chosen[0]


def _comparison_tables(result: RunComparison) -> list[Table]:
    """What the runs measured, with each metric's verdict; then the paired test's figures."""
    tested = [(m, m.paired) for m in result.metrics if m.paired is not None]
    cases = sorted({figures.cases for _, figures in tested})
    n = f"{cases[0]} to {cases[-1]}" if len(cases) > 1 else str(cases[0] if cases else 0)
    values = _table(f"metrics (verdicts at α = {result.alpha:g}, n = {n}, on Holm-adjusted p)")
    for column in ("metric", "A", "B", "B − A", "verdict"):
        values.add_column(column, overflow="fold")
    for m in result.metrics:
        delta = m.delta if m.delta is not None else (m.paired.delta if m.paired else None)
        values.add_row(
            Text(m.metric),
            _value_cell(m.value_a, m.passed_a),
            _value_cell(m.value_b, m.passed_b),
            Text("" if delta is None else f"{delta:+.4g}"),
            Text(m.verdict.split(" at α")[0], style=_VERDICT_STYLES.get(m.verdict, "dim")),
        )
    paired = _table(
        "paired test on the common cases (rates over turns: on the turns both judged): exact McNemar "
        "where a case holds one verdict a side, else clustered: bootstrap over cases (whole cases "
        f"resampled, its p); 95% CI from {result.resamples:,} resamples, seed {result.seed}"
    )
    for column in ("metric", "A only", "B only", "95% CI of B − A", "p", "p (Holm)"):
        paired.add_column(column, overflow="fold")
    for m, figures in tested:
        counts = figures.counts
        paired.add_row(
            m.metric,
            "" if counts is None else str(counts.only_a),
            "" if counts is None else str(counts.only_b),
            f"[{figures.ci_low:+.3f}, {figures.ci_high:+.3f}]",
            f"{figures.p_value:.4g}" + (" clustered" if figures.clustered else ""),
            "" if m.p_holm is None else f"{m.p_holm:.4g}",
        )
    return [values, paired] if tested else [values]


_VERDICT_STYLES = {"B better": "green", "B worse": "bold red"}


def _table(title: str) -> Table:
    return Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")


def _value_cell(value: float | None, passed: bool | None) -> Text:
    if value is None:
        return Text("n/a", style="dim")
    style = "" if passed is None else ("green" if passed else "bold red")
    return Text(_cell(value), style=style)


def _flip_view(flips: pd.DataFrame) -> pd.DataFrame:
    """Each side as its code, plus pass counts (``3/5``) when either run holds several samples."""
    repeats = bool((flips[["samples_a", "samples_b"]].fillna(0).to_numpy() > 1).any())

    def side(code: object, passes: object, samples: object) -> str:
        text = "" if is_missing(code) else str(code)
        return f"{text} {passes}/{samples}" if repeats and not is_missing(samples) else text

    return flips.assign(
        a=[side(*v) for v in zip(flips["code_a"], flips["passes_a"], flips["samples_a"], strict=True)],
        b=[side(*v) for v in zip(flips["code_b"], flips["passes_b"], flips["samples_b"], strict=True)],
    )


def _short_label(ref: RunRef) -> str:
    day = f" {ref.date.isoformat()}" if ref.date else ""
    return f"{ref.series.label} {short_id(ref.run_id)}{day}"


def emit(
    rows: pd.DataFrame,
    output: OutputFormat,
    *,
    title: str = "",
    empty: str = "no rows",
    columns: Sequence[str] | None = None,
    wide: bool = True,
) -> None:
    """Print rows as a rich table, CSV or JSON records (timestamps as ISO text).

    A table shows ``columns`` (default: all) unless ``wide``, through :func:`terminal_view`.
    """
    if output is OutputFormat.csv:
        out().print(rows.to_csv(index=False), end="", markup=False, highlight=False, soft_wrap=True)
        return
    if output is OutputFormat.json:
        out().print_json(json.dumps(_records(rows), default=str))
        return
    if rows.empty:
        out().print(f"{title}: {empty}" if title else empty, markup=False, highlight=False)
        return
    rows, notes = terminal_view(rows, columns, wide=wide)
    cells = pd.DataFrame(
        [["" if v is None else _cell(v) for v in record.values()] for record in _records(rows)],
        columns=[str(c) for c in rows.columns],
        index=rows.index,
    )
    for fitted in fit(cells, notes, width=out().width, wide=wide):
        _print_fitted(fitted, title)


def _print_fitted(fitted: FittedTable, title: str) -> None:
    """One fitted table: a table of names and values, or, when its rows carry prose, each row
    as a line of its names and values with its prose wrapped under it."""
    parts = [t for t in (title, *fitted.notes) if t]
    if fitted.dropped:
        parts.append(f"(without {', '.join(fitted.dropped)}: --wide shows them)")
    console = out()
    for line in title_lines(parts, console.width):  # above the table, at the terminal's width
        console.print(Text(line, style="italic"), highlight=False)
    if fitted.texts.columns.empty:
        table = Table(show_lines=False, box=box.SIMPLE_HEAD)
        for column in fitted.cells.columns:
            table.add_column(str(column), no_wrap=True)
        for record in fitted.cells.to_dict("records"):
            table.add_row(
                *(Text(v, style=rich_style(v) if k in VERDICT_COLUMNS else "") for k, v in record.items())
            )
        console.print(table)
        return
    for cells, prose in zip(fitted.cells.to_dict("records"), fitted.texts.to_dict("records"), strict=True):
        heading_line = Text(record_heading({str(k): v for k, v in cells.items()}), style="bold")
        console.print(Padding(heading_line, (0, 0, 0, 2)), highlight=False)
        for name, text in prose.items():
            if text:  # wrapped under its row, indented
                console.print(Padding(Text(f"{name}: {text}"), (0, 0, 0, 6)), highlight=False)


def title_lines(parts: Sequence[str], width: int) -> list[str]:
    """A title's parts (``lane deterministic_fluency``) joined by `` · `` into lines of at most
    ``width`` cells, broken between parts, never inside one (a part wider than a line has one
    to itself)."""
    lines: list[str] = []
    for part in parts:
        joined = f"{lines[-1]} · {part}" if lines else part
        if lines and cell_len(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(part)
    return lines


def _records(rows: pd.DataFrame) -> list[dict[str, object]]:
    """JSON-ready records: NaN/NA → None, days (DuckDB DATE) and timestamps → ISO strings."""
    rows = rows.copy()
    for column in rows.columns:
        if pd.api.types.is_datetime64_dtype(rows[column]):  # naive datetimes here are DATE columns
            rows[column] = rows[column].dt.strftime("%Y-%m-%d")
    values = rows.astype(object).where(rows.notna(), None)
    return [
        {str(k): (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in record.items()}
        for record in values.to_dict(orient="records")
    ]


def _cell(value: object) -> str:
    if isinstance(value, float):
        return number_text(value)
    return str(value)


def _parse_day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise KeyError(f"--since {text!r} is not a day (YYYY-MM-DD)") from None


@contextmanager
def _bad_query_exits() -> Iterator[None]:
    """Unknown runs/cases, bad arguments and failing SQL are bad input: a message and exit 2."""
    with bad_input_exits():
        try:
            yield
        except ValueError as exc:
            raise KeyError(str(exc)) from None
        except duckdb.Error as exc:
            err().print(f"[red]query failed:[/red] {escape(str(exc))}", highlight=False)
            raise typer.Exit(EXIT_BAD_INPUT) from None
