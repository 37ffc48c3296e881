"""History commands: ``history`` (+ ``history compact``), ``diff``, ``flaky``, ``first-failure``,
``compare``, ``report``. Each declares its arguments here, once; what it reads and prints is
in :mod:`eval_pipeline.cli.history_output`, imported when it runs (so ``--help`` loads none of
it) and handed the parsed arguments whole (``ctx.params``: a function there takes each
argument by the name it has here)."""

from __future__ import annotations

from typing import Annotated

import typer

from eval_pipeline.cli.arguments import OutputFormat
from eval_pipeline.cli.common import app, history_app
from eval_pipeline.dagster_wiring import fail_dead_runs_of_existing_instance

HistoryOption = Annotated[
    str | None,
    typer.Option("--history", help="History root (folder or fsspec URL); default $EVAL_PIPELINE_HISTORY."),
]
FormatOption = Annotated[OutputFormat, typer.Option("--format", "-f", help="table, csv or json.")]
LaneOption = Annotated[str | None, typer.Option("--lane", help="Only this lane.")]
SplitOption = Annotated[str | None, typer.Option("--split", help="Only this split.")]
WideOption = Annotated[
    bool, typer.Option("--wide", help="Every column, full run ids (tables fit 100 columns without it).")
]


@history_app.callback()
def history(  # noqa: PLR0913
    ctx: typer.Context,
    lane: LaneOption = None,
    metric: Annotated[
        str | None, typer.Option("--metric", help="This metric's value in every run (implies --metrics).")
    ] = None,
    metrics: Annotated[
        bool, typer.Option("--metrics", help="Every metric of every run, a line each, not a line per run.")
    ] = False,
    since: Annotated[
        str | None, typer.Option("--since", help="Only runs on or after this day (YYYY-MM-DD).")
    ] = None,
    sql: Annotated[
        str | None,
        typer.Option(
            "--sql",
            help="One read-only DuckDB query (SELECT, WITH, FROM, DESCRIBE, EXPLAIN) over the views "
            "metrics, case_predicates, turn_verdicts, transcripts, runs. It runs on a read-only connection: it cannot "
            "write files, ATTACH databases, install extensions or read files outside the history root.",
        ),
    ] = None,
    output: FormatOption = OutputFormat.table,
    root: HistoryOption = None,
    wide: WideOption = False,
) -> None:
    """Every stored run, oldest first: a line each with its series, verdict and failing checks
    (--metric NAME or --metrics: their metric values; --sql: any read-only query)."""
    fail_dead_runs_of_existing_instance()
    if ctx.invoked_subcommand is not None:
        return
    from eval_pipeline.cli.history_output import print_history

    print_history(**ctx.params)


@history_app.command("compact")
def history_compact(
    ctx: typer.Context,
    month: Annotated[
        str | None, typer.Option("--month", help="YYYY-MM; default: every month before the current one.")
    ] = None,
    root: HistoryOption = None,
    output: FormatOption = OutputFormat.table,
    wide: WideOption = False,
) -> None:
    """Rewrite a month's per-run files into one file per table per lane (queries answer the same)."""
    from eval_pipeline.cli.history_output import print_compacted

    print_compacted(**ctx.params)


@app.command("diff")
def diff(
    ctx: typer.Context,
    run_a: Annotated[str | None, typer.Argument(help="The earlier run id.")] = None,
    run_b: Annotated[str | None, typer.Argument(help="The later run id.")] = None,
    lane: LaneOption = None,
    output: FormatOption = OutputFormat.table,
    root: HistoryOption = None,
    wide: WideOption = False,
) -> None:
    """Metric deltas and flipped cases (pass→fail first) between two runs; default: the last two of each series."""
    from eval_pipeline.cli.history_output import print_diff

    print_diff(**ctx.params)


@app.command("flaky")
def flaky(
    ctx: typer.Context,
    lane: LaneOption = None,
    last: Annotated[int, typer.Option("--last", help="How many recent runs of each series to look at.")] = 10,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also list case predicates that never alternated.")
    ] = False,
    output: FormatOption = OutputFormat.table,
    root: HistoryOption = None,
    wide: WideOption = False,
) -> None:
    """Per-case flip rates over the last N runs of each lane/split/runtime, and lane rates with Wilson intervals."""
    from eval_pipeline.cli.history_output import print_flaky

    print_flaky(**ctx.params)


@app.command("first-failure")
def first_failure(  # noqa: PLR0913
    ctx: typer.Context,
    case_id: Annotated[str, typer.Argument(help="The case id.")],
    predicate: Annotated[str | None, typer.Option("--predicate", help="Only this predicate.")] = None,
    lane: LaneOption = None,
    split: SplitOption = None,
    runtime: Annotated[str | None, typer.Option("--runtime", help="Only this runtime target.")] = None,
    output: FormatOption = OutputFormat.table,
    root: HistoryOption = None,
    wide: WideOption = False,
) -> None:
    """The first run in which a case's predicate went from pass to fail (or failed from its first run), per series."""
    from eval_pipeline.cli.history_output import print_first_failures

    print_first_failures(**ctx.params)


@app.command("compare")
def compare(  # noqa: PLR0913
    ctx: typer.Context,
    runtimes: Annotated[
        list[str] | None,
        typer.Option("--runtime", help="A runtime target's name; give two (A, then B): their latest runs."),
    ] = None,
    runs: Annotated[
        list[str] | None,
        typer.Option(
            "--run", help="A run id (any unique prefix); give two (A, then B) instead of --runtime."
        ),
    ] = None,
    lane: Annotated[
        str | None, typer.Option("--lane", help="Default: the only lane both runtimes (or runs) ran.")
    ] = None,
    split: Annotated[
        str | None, typer.Option("--split", help="Default: the only split both runtimes ran.")
    ] = None,
    case_set: Annotated[
        str | None,
        typer.Option("--case-set", help="Default: the split's own cases (or the only common set)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document, for machines.")] = False,
    root: HistoryOption = None,
    wide: WideOption = False,
) -> None:
    """Is B different from A? Per metric, a paired test on the cases both ran (exact McNemar,
    bootstrap 95% CI, Holm across the lane's metrics), then the cases that flipped, once each."""
    from eval_pipeline.cli.history_output import print_comparison

    print_comparison(**ctx.params)


@app.command("report")
def report(
    ctx: typer.Context,
    folder: Annotated[str, typer.Option("--out", help="Folder to write index.html into.")] = "report",
    root: HistoryOption = None,
    open_it: Annotated[
        bool,
        typer.Option("--open", help="Open the report in the default browser ($BROWSER) after writing it."),
    ] = False,
) -> None:
    """A static HTML report (offline, no CDN): the latest run's checks and failing cases, then trends."""
    from eval_pipeline.cli.history_output import write_report_and_open

    write_report_and_open(**ctx.params)
