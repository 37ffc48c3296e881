"""``eval-pipeline run``: its arguments; the run itself (lanes through Dagster, what is printed
and written) is :mod:`eval_pipeline.cli.lane_runs`, imported when it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eval_pipeline.cli.arguments import Executor, finite_amount
from eval_pipeline.cli.common import app
from eval_pipeline.core import MAX_CONCURRENCY, MAX_REPEAT, frozen_after, history_root


@app.command()
def run(  # noqa: PLR0913
    ctx: typer.Context,
    lane: Annotated[
        list[str] | None, typer.Option("--lane", "-l", help="Lane to run (repeatable); default: all.")
    ] = None,
    split: Annotated[
        str | None, typer.Option(help="Split to run; default: each lane's nightly splits.")
    ] = None,
    runtime: Annotated[
        str | None,
        typer.Option(
            help="Runtime target name from evals/runtimes.yaml (reference, reference-no-gloss, …) or a "
            "runtime spec (replay:PATH, openai:URL, …; an undeclared spec is its own series), or "
            "history:RUN_ID to re-score a recorded run without calling any runtime."
        ),
    ] = None,
    runtime_option: Annotated[
        list[str] | None,
        typer.Option("--runtime-option", "-o", help="Adapter option KEY=VALUE (repeatable)."),
    ] = None,
    cases: Annotated[
        Path | None, typer.Option(help="Evaluate this case file under the lane's contract.")
    ] = None,
    history: Annotated[str | None, typer.Option(help="History root (folder or fsspec URL).")] = None,
    date: Annotated[str | None, typer.Option(help="Partition date YYYY-MM-DD; default: today (UTC).")] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1, max=MAX_CONCURRENCY, help="Cases evaluated at once; default: the runtime's preference."
        ),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_REPEAT,
            help="Samples per case, each in a fresh session; default: the target's repeat, else the lane's (1).",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Run seed: sample i of a case gets a seed derived from (seed, case, i), sent to runtimes "
            "that take one (openai: seed, python: a factory's seed parameter); default: none.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of tables.")
    ] = False,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit", help="Also write JUnit XML here: a testsuite per lane run, a testcase per case."
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Dagster's step logs.")] = False,
    summary_md: Annotated[
        Path | None,
        typer.Option(
            "--summary-md",
            help="Also write a GitHub-flavoured markdown summary here: verdict, metrics against the "
            "baseline, failing cases, faults.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="What the summary compares with: a run id (or unique prefix), or a runtime target "
            "(its latest run of each lane's split and cases); default: each series' previous run."
        ),
    ] = None,
    cache: Annotated[
        bool,
        typer.Option(
            "--cache",
            help="Answer sessions asked before from the response cache (keyed by runtime version and "
            "request); default: the target's cache setting.",
        ),
    ] = False,
    notify: Annotated[
        bool,
        typer.Option("--notify", help="Send each lane run's events to the channels of evals/notify.yaml."),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Answer the sessions the series' last interrupted (killed, or stopped by its budget) run "
            "journaled from its journal and send only the rest; with no journal, start afresh.",
        ),
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            callback=finite_amount,
            help="Stop starting sessions once this run's turns cost this much (needs the target's "
            "price); the run is void (exit 4) and --resume continues it. Default: the target's budget.",
        ),
    ] = None,
    max_turns: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Stop starting sessions once this run has sent this many turns; the run is void "
            "(exit 4) and --resume continues it. Default: the target's budget.",
        ),
    ] = None,
    executor: Annotated[
        Executor | None,
        typer.Option(
            help="in_process (default) or celery: steps on Celery workers (EVAL_PIPELINE_CELERY_BROKER); "
            "default: EVAL_PIPELINE_EXECUTOR when it says celery."
        ),
    ] = None,
) -> None:
    """Evaluate lanes against a runtime through Dagster; exit 1 if a blocking check fails."""
    with frozen_after():  # what the command imports lives as long as the process
        from eval_pipeline.cli.lane_runs import run_lanes
        from eval_pipeline.run import DriveSettings, RunRequest

    request = RunRequest(
        lanes=tuple(lane or ()),
        split=split,
        runtime=runtime,
        runtime_options=tuple(runtime_option or ()),
        cases=cases,
        history_root=history or history_root(),
        history_given=history is not None,
        date=date,
        drive=DriveSettings(
            concurrency=concurrency,
            repeat=repeat,
            seed=seed,
            cache=True if cache else None,
            resume=resume,
            max_cost=max_cost,
            max_turns=max_turns,
        ),
        executor=None if executor is None else executor.value,
        as_json=as_json,
        junit=junit,
        summary_md=summary_md,
        baseline=baseline,
        notify=notify,
        verbose=verbose,
    )
    run_lanes(ctx, request)
