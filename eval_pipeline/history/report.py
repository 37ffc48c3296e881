"""A static HTML report of the history, leading with what failed: per lane, the latest run of
each series side by side, then per series its checks and its failing cases (reason and
surface) and its no_regression findings against the run before it, then every metric's trend with its threshold (a line per series), then the cases
that flipped in each series' latest run. One self-contained file (inline SVG and CSS, no
script, no CDN) that opens offline.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import duckdb
import pandas as pd

from eval_pipeline.failures import failing_cases, last_surfaces
from eval_pipeline.history.diff import latest_diff
from eval_pipeline.history.regression import find_regressions, regression_sentence
from eval_pipeline.history.runs import RUN_MATCH, RunRef, is_missing, latest_runs, ref_from_row
from eval_pipeline.history.svg import Chart, Point, grid_svg, trend_svg
from eval_pipeline.history.views import connect
from eval_pipeline.lanes import declared_lane, lane_kind
from eval_pipeline.paired import ALPHA
from eval_pipeline.palette import css_class, css_rules
from eval_pipeline.samples import flaky_within_run, sample_count
from eval_pipeline.scoring import number_text, verdict_word

FAILING_ROWS_SHOWN = 200

_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.surface { max-width: 32em; font-size: 12px; }
td.reason { max-width: 36em; }
""" + css_rules()


def lane_charts(con: duckdb.DuckDBPyConnection, lane: str) -> list[str]:
    """One SVG trend chart per metric of ``lane``; a line per series (see :func:`series_name`)."""
    rows = con.execute(
        "SELECT metric, split, runtime, case_set, coalesce(started_at, date::TIMESTAMPTZ) AS run_at, value, "
        "threshold_op, threshold FROM metrics WHERE lane = ? ORDER BY metric, split, runtime, case_set, run_at",
        [lane],
    ).df()
    charts = []
    for metric, by_metric in rows.groupby("metric", sort=True):
        series: dict[str, list[Point]] = {}
        for (split, runtime, case_set), points in by_metric.groupby(
            ["split", "runtime", "case_set"], sort=True
        ):
            series[series_name(str(split), str(runtime), str(case_set))] = [
                (pd.Timestamp(at).to_pydatetime(), None if pd.isna(v) else float(v))
                for at, v in zip(points["run_at"], points["value"], strict=True)
            ]
        last = by_metric.iloc[-1]
        threshold = None if pd.isna(last["threshold"]) else float(last["threshold"])
        label = f"{last['threshold_op']} {threshold:g}" if threshold is not None else ""
        charts.append(trend_svg(Chart(str(metric), series, threshold, label)))
    return charts


def series_name(split: str, runtime: str, case_set: str) -> str:
    """A series within a lane: ``split · runtime``, plus the case set when not the split's own."""
    return f"{split} · {runtime}" + ("" if case_set == split else f" · {case_set}")


def lane_chart_svg(root: str, lane: str) -> str:
    """Every metric chart of ``lane`` tiled into one SVG (for Dagster asset metadata)."""
    with connect(root) as con:
        return grid_svg(lane_charts(con, lane))


def lane_chart_markdown(root: str, lane: str) -> str:
    """The lane's chart as markdown: an image with an inline ``data:`` URI (no file, no server)."""
    encoded = base64.b64encode(lane_chart_svg(root, lane).encode()).decode()
    return f"![{lane} metrics over time](data:image/svg+xml;base64,{encoded})"


def render_report(root: str) -> str:
    """The whole report as one HTML document."""
    with connect(root) as con:
        lanes = [row[0] for row in con.execute("SELECT DISTINCT lane FROM runs ORDER BY lane").fetchall()]
        body = [_lane_section(con, lane) for lane in lanes] or ["<p>No runs in history yet.</p>"]
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>eval-pipeline history</title><style>{_CSS}</style></head><body>"
        f"<h1>eval-pipeline history</h1><p>Generated {generated} from {escape(root)}.</p>"
        f"{''.join(body)}</body></html>\n"
    )


def write_report(root: str, out_dir: str | Path) -> Path:
    """Write ``index.html`` into ``out_dir`` (created if needed) and return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "index.html"
    path.write_text(render_report(root), encoding="utf-8")
    return path


def _lane_section(con: duckdb.DuckDBPyConnection, lane: str) -> str:
    latest = [ref_from_row(row) for _, row in latest_runs(con, lane=lane, last=1).iterrows()]
    parts = [f'<section id="{escape(lane)}"><h2>{escape(lane)}</h2>']
    parts.append("<h3>Latest run of each series</h3>" + _side_by_side(con, latest))
    for run in latest:
        title = f"{series_name(run.split, run.runtime, run.case_set)} · latest run {run.run_id} ({_day(run.date)})"
        parts.append(f'<h3 class="latest">{escape(title)}</h3>')
        checks = con.execute(
            "SELECT metric, value, threshold_op, threshold, severity, passed, verdict FROM metrics "
            f"WHERE {RUN_MATCH} AND threshold IS NOT NULL ORDER BY passed NULLS FIRST, severity, metric",
            run.params(),
        ).df()
        parts.append("<h4>Checks</h4>" + _checks_table(checks))
        predicates = con.execute(f"SELECT * FROM case_predicates WHERE {RUN_MATCH}", run.params()).df()
        parts.append(_regression_section(con, run, predicates))
        parts.append(_failing_section(con, run, predicates))
        parts.append(_flaky_section(predicates))
    parts.append('<h3>Trends</h3><div class="charts">')
    parts.extend(lane_charts(con, lane))
    parts.append("</div>")
    for run in latest:
        diff = latest_diff(con, run.series())
        label = escape(series_name(run.split, run.runtime, run.case_set))
        if diff is None:
            parts.append(f"<p>{label}: only one run, nothing to compare yet.</p>")
            continue
        if diff.note:
            parts.append(f'<p class="note">{escape(diff.note)}</p>')
        if diff.flips.empty:
            parts.append(f"<p>{label}: no case flipped since {escape(diff.a.run_id)}.</p>")
        else:
            parts.append(
                f"<h4>{label}: flipped cases since {escape(diff.a.run_id)}</h4>" + _flips_table(diff.flips)
            )
    parts.append("</section>")
    return "".join(parts)


def _regression_section(con: duckdb.DuckDBPyConnection, run: RunRef, predicates: pd.DataFrame) -> str:
    """The run's ``no_regression`` findings against the run before it in its series, as the
    check decided them (:func:`eval_pipeline.history.regression.find_regressions`)."""
    spec = declared_lane(run.lane)
    metrics = con.execute(f"SELECT * FROM metrics WHERE {RUN_MATCH}", run.params()).df()
    findings = find_regressions(
        con,
        lane=run.lane,
        split=run.split,
        runtime=run.runtime,
        case_set=run.case_set,
        metrics=metrics,
        case_predicates=predicates,
        metric_rows=lane_kind(spec).metric_rows if spec else {},
        alpha=spec.regression_alpha if spec else ALPHA,
        run_id=run.run_id,
    )
    previous = next((f.previous_run_id for f in findings if f.previous_run_id), None)
    if previous is None:
        return "<p>no_regression: first run of this series, nothing to compare.</p>"
    word = "warn" if any(f.regressed for f in findings) else "pass"
    rows = [
        f"<tr><td>{escape(f.metric)}</td><td>{_number(f.previous_value)}</td><td>{_number(f.value)}</td>"
        f'<td class="num">{"" if f.worse is None else f.worse}</td>'
        f'<td class="num">{"" if f.better is None else f.better}</td>'
        f'<td class="num">{"" if f.p_value is None else f"{f.p_value:.4g}"}</td>'
        f'<td class="{css_class("warn" if f.regressed else "pass")}">{"regressed" if f.regressed else "held"}</td>'
        f"<td>{escape(f.note)}</td></tr>"
        for f in findings
        if f.cases is not None or f.regressed
    ]
    return (
        f'<h4>no_regression against {escape(previous)}: <span class="{css_class(word)}">{word}</span></h4>'
        f"<p>{escape(regression_sentence(findings))}</p><table><tr><th>metric</th><th>before</th><th>now</th>"
        "<th>worse</th><th>better</th><th>p (one-sided)</th><th>result</th><th>why</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _number(value: float | None) -> str:
    return "null" if value is None else number_text(value)


def _failing_section(con: duckdb.DuckDBPyConnection, run: RunRef, predicates: pd.DataFrame) -> str:
    """The run's failing cases (hard first) with their reasons and the surface that failed."""
    failing = failing_cases(predicates)
    if failing.empty:
        return f'<p class="{css_class("pass")}">No failing case.</p>'
    transcripts = con.execute(
        f"SELECT case_id, turn_index, surface FROM transcripts WHERE {RUN_MATCH}", run.params()
    ).df()
    surfaces = last_surfaces(transcripts)
    rows = []
    for row in failing.head(FAILING_ROWS_SHOWN).to_dict("records"):
        word = "fail" if row["severity"] == "hard" else "warn"
        surface = surfaces.get(row["case_id"])
        rows.append(
            f'<tr><td class="{word}">{escape(row["case_id"])}</td><td>{escape(row["predicate"])}</td>'
            f"<td>{escape(row['severity'])}</td><td><code>{escape(row['code'])}</code></td>"
            f'<td class="reason">{escape(row["reason"])}</td><td class="surface">{_text(surface)}</td></tr>'
        )
    more = (
        f"<p>…and {len(failing) - FAILING_ROWS_SHOWN} more (eval-pipeline show {escape(run.run_id[:8])}).</p>"
        if len(failing) > FAILING_ROWS_SHOWN
        else ""
    )
    cases = failing["case_id"].nunique()
    return (
        f'<h4>Failing cases ({cases} case(s), {len(failing)} result(s))</h4><table class="failing">'
        "<tr><th>case</th><th>predicate</th><th>severity</th><th>code</th><th>reason</th><th>surface</th></tr>"
        + "".join(rows)
        + "</table>"
        + more
    )


def _flaky_section(predicates: pd.DataFrame) -> str:
    """The case predicates whose samples disagree within the run, most flips first (see
    :func:`eval_pipeline.samples.flaky_within_run`). Nothing for a run of one sample, which
    includes the runs stored before ``sample_index`` existed (null there)."""
    samples = sample_count(predicates)
    if samples <= 1:
        return ""
    flaky = flaky_within_run(predicates)
    if flaky.empty:
        return f'<p class="{css_class("pass")}">Its {samples} samples agree on every case.</p>'
    rows = [
        f'<tr><td class="warn">{escape(str(row["case_id"]))}</td><td>{escape(str(row["predicate"]))}</td>'
        f'<td class="num">{row["passes"]}/{row["samples"]}</td><td class="num">{row["flips"]}</td>'
        f'<td class="num">{row["pass_hat_k"]:.3g}</td></tr>'
        for row in flaky.head(FAILING_ROWS_SHOWN).to_dict("records")
    ]
    more = f"<p>…and {len(flaky) - FAILING_ROWS_SHOWN} more.</p>" if len(flaky) > FAILING_ROWS_SHOWN else ""
    return (
        f"<h4>Flaky within the run ({flaky['case_id'].nunique()} case(s) whose {samples} samples disagree)</h4>"
        '<table class="flaky"><tr><th>case</th><th>predicate</th><th>passed</th><th>flips</th>'
        "<th>pass^k</th></tr>" + "".join(rows) + "</table>" + more
    )


def _side_by_side(con: duckdb.DuckDBPyConnection, runs: list[RunRef]) -> str:
    """Metric rows × series columns: each series' latest value, styled by its check verdict."""
    if not runs:
        return ""
    values: dict[tuple[int, str], pd.Series] = {}
    for index, run in enumerate(runs):
        rows = con.execute(
            f"SELECT metric, value, passed, severity, verdict FROM metrics WHERE {RUN_MATCH}", run.params()
        ).df()
        values.update({(index, str(row["metric"])): row for _, row in rows.iterrows()})
    metrics = sorted({metric for _, metric in values})
    header = "".join(
        f"<th>{escape(series_name(r.split, r.runtime, r.case_set))}<br><small>{escape(r.run_id)} "
        f"({_day(r.date)})</small></th>"
        for r in runs
    )
    body = []
    for metric in metrics:
        cells = []
        for index in range(len(runs)):
            row = values.get((index, metric))
            if row is None or is_missing(row["value"]):
                cells.append('<td class="num">–</td>' if row is None else '<td class="num">null</td>')
                continue
            verdict = _word(row)
            cells.append(f'<td class="num {css_class(verdict)}">{number_text(float(row["value"]))}</td>')
        body.append(f"<tr><td>{escape(metric)}</td>{''.join(cells)}</tr>")
    return f'<table class="series"><tr><th>metric</th>{header}</tr>{"".join(body)}</table>'


def _word(row: pd.Series) -> str:
    """The row's verdict word: stored (runs since the verdict column) or derived (older runs)."""
    stored = row.get("verdict")
    if not is_missing(stored):
        return str(stored)
    passed = None if is_missing(row["passed"]) else bool(row["passed"])
    severity = None if is_missing(row.get("severity")) else str(row["severity"])
    return verdict_word(passed, severity)


def _checks_table(checks: pd.DataFrame) -> str:
    rows = []
    for _, c in checks.iterrows():
        verdict = _word(c)
        value = "null" if pd.isna(c["value"]) else number_text(float(c["value"]))
        rows.append(
            f"<tr><td>{escape(str(c['metric']))}</td><td>{value}</td>"
            f"<td>{escape(str(c['threshold_op']))} {c['threshold']:g}</td><td>{escape(str(c['severity']))}</td>"
            f'<td class="{css_class(verdict)}">{verdict}</td></tr>'
        )
    return (
        "<table><tr><th>metric</th><th>value</th><th>threshold</th><th>severity</th><th>result</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _flips_table(flips: pd.DataFrame) -> str:
    rows = [
        f"<tr><td>{escape(str(f['case_id']))}</td><td>{escape(str(f['predicate']))}</td>"
        f'<td class="{"fail" if str(f["change"]).endswith("fail") else "pass"}">{escape(str(f["change"]))}</td>'
        f'<td class="surface">{_surface(f, "a")}</td><td class="surface">{_surface(f, "b")}</td></tr>'
        for _, f in flips.iterrows()
    ]
    return (
        "<table><tr><th>case</th><th>predicate</th><th>change</th><th>surface before</th><th>surface after</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _surface(flip: pd.Series, side: str) -> str:
    """A flipped case's surface in one run: absent from that run is not the same as not kept."""
    if is_missing(flip[f"passed_{side}"]) and is_missing(flip[f"code_{side}"]):
        return "<em>not in this run</em>"
    return _text(flip[f"surface_{side}"])


def _text(value: object) -> str:
    return "<em>transcripts not kept</em>" if is_missing(value) else escape(str(value))


def _day(value: object) -> str:
    return "?" if is_missing(value) else pd.Timestamp(str(value)).date().isoformat()
