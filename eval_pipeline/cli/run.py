"""``eval-pipeline run``: materialize lanes through Dagster and print metrics and checks."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer
from rich.markup import escape
from rich.table import Table

from eval_pipeline.cli.arguments import run_night
from eval_pipeline.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_OK,
    app,
    bad_input_exits,
    err,
    out,
)
from eval_pipeline.dagster_wiring.code_location import EXECUTOR_ENV
from eval_pipeline.dagster_wiring.launch import LaneOutcome, ensure_instance, materialize_lane
from eval_pipeline.lanes.registry import discover_lanes
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.pipeline import lane_threads, load_split
from eval_pipeline.progress import rich_progress
from eval_pipeline.runtimes.options import parse_runtime_options
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline.settings import CELERY_BROKER_ENV, celery_broker
from eval_pipeline.settings import runtime_spec as default_runtime_spec


class Executor(StrEnum):
    in_process = "in_process"
    celery = "celery"


EXIT_RUN_FAILED = 3  # a stage raised (a bug or an environment problem), not a check
MAX_CONCURRENCY = 1024


def _select(lanes: list[str] | None, split: str | None, custom: bool) -> list[tuple[LaneSpec, str]]:
    specs = discover_lanes()
    if lanes:
        known = {s.name: s for s in specs}
        unknown = [name for name in lanes if name not in known]
        if unknown:
            raise KeyError(f"unknown lane(s) {unknown}; lanes: {sorted(known)}")
        specs = [known[name] for name in dict.fromkeys(lanes)]
    pairs: list[tuple[LaneSpec, str]] = []
    for spec in specs:
        if split is None:
            # A custom case file runs once, under the rules of the lane's first nightly split.
            pairs.extend((spec, s) for s in spec.nightly_splits[: 1 if custom else None])
        elif split in spec.splits:
            pairs.append((spec, split))
        else:
            raise KeyError(f"lane {spec.name!r} has no split {split!r}; it has {sorted(spec.splits)}")
    return pairs


def _records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    if df is None:
        return []
    return json.loads(df.to_json(orient="records", date_format="iso"))


def _document(batch_id: str, outcomes: list[LaneOutcome]) -> dict[str, Any]:
    lanes = []
    for o in outcomes:
        metrics = {} if o.metrics is None else dict(zip(o.metrics["metric"], o.metrics["value"], strict=True))
        lanes.append(
            {
                "lane": o.lane,
                "split": o.split,
                "runtime": o.runtime,
                "case_set": o.case_set,
                "run_id": o.run_id,
                "success": o.success,
                "failure": o.failure,
                "metrics": {k: None if pd.isna(v) else float(v) for k, v in metrics.items()},
                "checks": [
                    {
                        "name": c.name,
                        "passed": c.passed,
                        "severity": c.severity,
                        "value": c.value,
                        "threshold": c.threshold,
                    }
                    for c in o.checks
                ],
                "turn_predicates": _records(o.turn_predicates),
                "case_predicates": _records(o.case_predicates),
            }
        )
    return {"run_id": batch_id, "lanes": lanes}


def _print(outcome: LaneOutcome) -> None:
    cases = "" if outcome.case_set == outcome.split else f" · cases {outcome.case_set}"
    title = escape(f"{outcome.lane} [{outcome.split}] · {outcome.runtime}{cases}")
    if outcome.failure is not None:
        err().print(
            f"[red]{title}: run failed[/red] ({outcome.failure_kind}): {outcome.failure}", highlight=False
        )
        return
    checks = {c.name: c for c in outcome.checks}
    table = Table(title=title, title_justify="left", caption=f"run {outcome.run_id}", caption_justify="left")
    for column in ("metric", "value", "n", "threshold", "check"):
        table.add_column(column, justify="right" if column in ("value", "n") else "left")
    assert outcome.metrics is not None
    for row in outcome.metrics.to_dict("records"):
        value = "missing" if pd.isna(row["value"]) else f"{row['value']:.4g}"
        n = "" if pd.isna(row["denominator"]) else f"{row['numerator']:g}/{row['denominator']:g}"
        check = checks.get(row["metric"])
        if check is None:
            verdict = ""
        elif check.passed:
            verdict = "[green]pass[/green]"
        else:
            verdict = "[red]FAIL[/red]" if check.severity == "ERROR" else "[yellow]warn[/yellow]"
        threshold = "" if check is None else f"{check.threshold} ({check.severity})"
        table.add_row(str(row["metric"]), value, n, threshold, verdict)
    out().print(table)
    metric_names = set(outcome.metrics["metric"])
    for check in outcome.checks:
        if check.name not in metric_names:  # lane-level checks, e.g. no_regression
            verdict = "[green]pass[/green]" if check.passed else f"[yellow]{check.severity.lower()}[/yellow]"
            out().print(f"  {check.name}: {verdict}")


@app.command()
def run(
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
            "runtime spec (replay:PATH, openai:URL, …; an undeclared spec is its own series)."
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
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of tables.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Dagster's step logs.")] = False,
    executor: Annotated[
        Executor | None,
        typer.Option(
            help="in_process (default) or celery: steps on Celery workers (EVAL_PIPELINE_CELERY_BROKER); "
            "default: EVAL_PIPELINE_EXECUTOR when it says celery."
        ),
    ] = None,
) -> None:
    """Evaluate lanes against a runtime through Dagster; exit 1 if a blocking check fails."""
    with bad_input_exits():
        pairs = _select(lane, split, custom=cases is not None)
        if cases is not None and len({spec.name for spec, _ in pairs}) != 1:
            raise KeyError("--cases evaluates one lane's contract: name exactly one --lane")
        for spec, s in pairs:  # every case file is valid, and its prompts composable, before anything runs
            lane_threads(spec, s, [item.case for item in load_split(spec, s, cases)])
        target = find_target(
            default_runtime_spec() if runtime is None else runtime,  # '' is bad input, not the default
            parse_runtime_options(runtime_option or []),
        )
        build_runtime(target.spec, target.options).close()  # a bad spec fails here, before any run starts
        tomorrow = datetime.now(UTC).date() + timedelta(days=1)  # east of UTC it may already be tomorrow
        day = run_night(date or datetime.now(UTC).date().isoformat(), latest=tomorrow)
        chosen = executor or (
            Executor.celery if os.environ.get(EXECUTOR_ENV) == "celery" else Executor.in_process
        )
        if chosen is Executor.celery and not celery_broker():
            raise KeyError(
                f"--executor celery needs a broker: set {CELERY_BROKER_ENV} (e.g. redis://host:6379/0)"
            )
    instance = ensure_instance()
    batch_id = uuid.uuid4().hex
    outcomes = []
    for spec, s in pairs:
        with rich_progress(f"{spec.name} [{s}] · {target.name}", console=err()) as bar:
            outcome = materialize_lane(
                spec,
                target,
                instance=instance,
                split=s,
                date=day,
                cases_path=str(cases) if cases else "",
                concurrency=concurrency,
                history_root=history or "",
                progress=bar,
                tags={"eval_pipeline/batch_id": batch_id, "eval_pipeline/source": "cli"},
                log_level="DEBUG" if verbose else "CRITICAL",  # failures are reported below, once
                executor=chosen.value,
            )
        outcomes.append(outcome)
        if not as_json:
            _print(outcome)
    if as_json:
        typer.echo(json.dumps(_document(batch_id, outcomes), indent=2, sort_keys=False))
    if any(o.failure is not None for o in outcomes):
        kinds = {o.failure_kind for o in outcomes if o.failure is not None}
        raise typer.Exit(EXIT_BAD_INPUT if kinds & {"RuntimeSpecError", "CaseFileError"} else EXIT_RUN_FAILED)
    blocking = [(o, c) for o in outcomes for c in o.blocking_failures]
    if not as_json:
        summary = f"{len(outcomes)} lane run(s); {len(blocking)} blocking check failure(s)"
        out().print(f"[red]{summary}[/red]" if blocking else f"[green]{summary}[/green]")
    raise typer.Exit(EXIT_CHECK_FAILED if blocking else EXIT_OK)
