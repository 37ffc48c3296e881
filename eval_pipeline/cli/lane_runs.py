"""What ``eval-pipeline run`` does (:mod:`eval_pipeline.cli.run` declares its arguments): materialize
lanes through Dagster and print metrics and checks."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from eval_pipeline.cases import CaseFileError
from eval_pipeline.cli.arguments import local_folder, run_night
from eval_pipeline.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_VOID,
    bad_input_exits,
    err,
    out,
    run_title,
    short_id,
)
from eval_pipeline.cli.notifier import RunNotifier, run_notifier
from eval_pipeline.cli.rescore import recorded_lane_and_split, rescore_of, with_history_root
from eval_pipeline.cli.summary import check_baseline, write_summary
from eval_pipeline.core import CELERY_BROKER_ENV, celery_broker, frozen_after
from eval_pipeline.core import runtime_spec as default_runtime_spec
from eval_pipeline.lanes import LaneSpec, discover_lanes
from eval_pipeline.metrics import USAGE_METRICS, number_text, summed_usage, timing_text, totals_text
from eval_pipeline.outcome import MEASUREMENT_CHECK, evidence_object, fault_counts, fault_text
from eval_pipeline.report import SuiteRun, junit_xml, rich_style
from eval_pipeline.run import RunRequest, in_flight, recording_of, rich_progress, worker_count, write_cases
from eval_pipeline.runtimes.base import RecordedRuntime, RuntimeSpecError
from eval_pipeline.runtimes.names import stands_for
from eval_pipeline.runtimes.options import parse_runtime_options
from eval_pipeline.runtimes.registry import build_runtime, split_spec
from eval_pipeline.runtimes.targets import RuntimeTarget, TargetsFileError, find_target
from eval_pipeline.runtimes.unsupplied import fields_not_supplied, unsupplied_note
from eval_pipeline.runtimes.warm import warm_runtimes
from eval_pipeline.tables import StageFile, batch_turns, column_values

if TYPE_CHECKING:
    from eval_pipeline.dagster_wiring.outcomes import LaneOutcome

FAILING_SHOWN = 10  # failing case rows printed per lane run; `show RUN` lists them all


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


def _prepared_cases(ctx: typer.Context, spec: LaneSpec, split: str, cases: Path | None) -> StageFile:
    """The cases stage file of a lane run about to start, written now (so every case is checked
    before anything runs) and handed to the run, which takes it; removed when the command ends
    if no run took it."""
    prepared = write_cases(spec, split, cases)
    ctx.call_on_close(partial(prepared.path.unlink, missing_ok=True))
    return prepared


def _recorded_pairs(
    recording: RecordedRuntime,
    pairs: list[tuple[LaneSpec, str]],
    prepared: dict[tuple[str, str], StageFile],
    *,
    named: bool,
) -> list[tuple[LaneSpec, str]]:
    """The lane runs a recording can answer, decided before anything runs: without ``--lane``
    the lanes whose cases it recorded (said on stderr); a named lane it recorded no case of,
    or only some cases of, is bad input."""
    recorded = recording.recorded_cases
    answered, skipped = [], []
    for spec, split in pairs:
        case_ids = column_values(prepared[(spec.name, split)].read(["case_id"]), "case_id")
        missing = [case for case in case_ids if case not in recorded]
        if not missing:
            answered.append((spec, split))
        elif named or len(missing) < len(case_ids):
            raise KeyError(
                f"{recording.source}: records no turn of {len(missing)} of the {len(case_ids)} cases of "
                f"{spec.name} [{split}] (the first: {missing[0]!r}); replay a recording of the whole split"
            )
        else:
            skipped.append(f"{spec.name} [{split}]")
    if not answered:
        raise KeyError(f"{recording.source}: records no case of any lane's split; name the lane with --lane")
    if skipped:
        err().print(
            f"{recording.source} records no case of {', '.join(skipped)}: not run",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return answered


def _records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    if df is None:
        return []
    return json.loads(df.to_json(orient="records", date_format="iso"))


def _with_evidence(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with ``evidence`` as a JSON object, not a string holding JSON."""
    return [{**row, "evidence": evidence_object(row.get("evidence"))} for row in rows]


def _document(batch_id: str, outcomes: list[LaneOutcome]) -> dict[str, Any]:
    lanes = []
    for o in outcomes:
        metrics = {} if o.metrics is None else dict(zip(o.metrics["metric"], o.metrics["value"], strict=True))
        lanes.append(
            {
                **o.series.columns(),
                "run_id": o.run_id,
                "success": o.success,
                "verdict": o.verdict,
                "void": o.void,
                "measurement": o.measurement_note,
                "journal": o.journal_note,
                "failure": o.failure,
                "metrics": {k: None if pd.isna(v) else float(v) for k, v in metrics.items()},
                "checks": [
                    {
                        "name": c.name,
                        "passed": c.passed,
                        "verdict": c.verdict,
                        "severity": c.severity,
                        "value": c.value,
                        "threshold": c.threshold,
                        "n": c.n,
                        "void_reason": c.reason if c.verdict == "void" else None,
                        "reason": c.reason or None,
                        "description": c.description,
                        "failing_case_ids": list(c.failing_case_ids),
                    }
                    for c in o.checks
                ],
                "failing": [] if o.outcome is None else [asdict(item) for item in o.outcome.failing],
                "failing_results": 0 if o.outcome is None else o.outcome.failing_results,
                "failing_cases": 0 if o.outcome is None else o.outcome.failing_cases,
                "faults": fault_counts(o.transcripts) if o.transcripts is not None else [],
                "telemetry_not_supplied": _lists(o.outcome.telemetry_not_supplied if o.outcome else {}),
                "unsupplied_fields": fields_not_supplied(
                    o.outcome.telemetry_not_supplied if o.outcome else {}
                ),
                "turn_predicates": _with_evidence(_records(o.turn_predicates)),
                "case_predicates": _with_evidence(_records(o.case_predicates)),
            }
        )
    return {"run_id": batch_id, "lanes": lanes}


def _verdict(word: str) -> str:
    return f"[{rich_style(word)}]{word}[/]"


def _lists(mapping: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    return {name: list(values) for name, values in mapping.items()}


def _print_unsupplied(outcome: LaneOutcome, scheme: str) -> None:
    """The one line naming the predicates that read n/a without the runtime's telemetry."""
    if outcome.outcome is not None and outcome.outcome.telemetry_not_supplied:
        note = unsupplied_note(outcome.outcome.telemetry_not_supplied, scheme)
        out().print(Text(f"  {note}"), highlight=False)


def _print(outcome: LaneOutcome, scheme: str, sessions_in_flight: int) -> None:
    title = escape(run_title(outcome.lane, outcome.split, outcome.runtime, outcome.case_set))
    if outcome.journal_note:
        err().print(outcome.journal_note, markup=False, highlight=False, soft_wrap=True)
    if outcome.budget_reached:
        err().print(
            f"[{rich_style('void')}]{title}: void[/]: {escape(outcome.measurement_note)}", highlight=False
        )
        return
    if outcome.failure is not None:
        err().print(
            f"[red]{title}: run failed[/red] ({outcome.failure_kind}): {escape(outcome.failure)}",
            highlight=False,
        )
        _print_faults(outcome)
        return
    checks = {c.name: c for c in outcome.checks}
    caption = f"run {short_id(outcome.run_id)}"
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    assert outcome.metrics is not None
    sampled = _samples(outcome.metrics) > 1
    columns = ("metric", "value", "n", *(("95% CI", "pass^k") if sampled else ()), "threshold", "check")
    if sampled:
        table.caption = f"{caption} · {_samples(outcome.metrics)} samples per case"
    for column in columns:
        # Only the threshold's words may wrap: a metric name or a number is never cut.
        table.add_column(
            column,
            justify="left" if column in ("metric", "threshold", "check") else "right",
            no_wrap=column != "threshold",
        )
    for row in outcome.metrics.to_dict("records"):
        if row["metric"] in USAGE_METRICS and row["metric"] not in checks:
            continue  # said on the usage line below
        value = "n/a" if pd.isna(row["value"]) else number_text(row["value"])
        n = "" if pd.isna(row["denominator"]) else f"{row['numerator']:.15g}/{row['denominator']:.15g}"
        check = checks.get(row["metric"])
        verdict = "" if check is None else _verdict(check.verdict)
        threshold = "" if check is None else f"{check.threshold} ({check.severity})"
        gated = row.get("statistic")
        if check is not None and sampled and isinstance(gated, str) and gated != "mean":
            threshold += f" on {gated}"
        extra = (_interval_text(row), _number(row.get("pass_hat_k"))) if sampled else ()
        table.add_row(str(row["metric"]), value, n, *extra, threshold, verdict)
    out().print(table)
    usage = _usage(outcome)
    out().print(f"  usage: {escape(totals_text(usage))}", highlight=False)
    out().print(f"         {escape(timing_text(usage, sessions_in_flight))}", highlight=False)
    metric_names = set(outcome.metrics["metric"])
    for check in outcome.checks:
        if check.name not in metric_names:  # lane-level checks: measurement, no_regression
            said = check.reason if check.verdict == "n/a" else check.description
            shown = check.verdict in ("fail", "warn", "n/a") and check.name != MEASUREMENT_CHECK
            note = f" ({escape(said)})" if shown and said else ""
            out().print(f"  {check.name}: {_verdict(check.verdict)}{note}", highlight=False)
    if not outcome.void:  # a void run says why once, below; a check that measured nothing says it here
        for check in outcome.checks:
            if check.name in metric_names and check.verdict == "void":
                out().print(
                    f"  {check.name}: {_verdict('void')} {escape(check.description.removeprefix('void: '))}",
                    highlight=False,
                )
    _print_unsupplied(outcome, scheme)
    _print_flaky(outcome)
    _print_failing(outcome)
    _print_faults(outcome)


def _usage(outcome: LaneOutcome) -> dict[str, float | None]:
    """A lane run's usage metrics by name (none for a run that failed before its metrics)."""
    if outcome.metrics is None:
        return {}
    rows = outcome.metrics[outcome.metrics["metric"].isin(USAGE_METRICS)]
    return {
        str(r["metric"]): None if pd.isna(r["value"]) else float(r["value"]) for r in rows.to_dict("records")
    }


def _samples(metrics: pd.DataFrame) -> int:
    if "samples" not in metrics.columns or metrics["samples"].isna().all():
        return 1
    return int(metrics["samples"].max())


def _number(value: Any) -> str:
    return "" if value is None or pd.isna(value) else f"{value:.4g}"


def _interval_text(row: dict[Any, Any]) -> str:
    low, high = row.get("ci_low"), row.get("ci_high")
    return "" if low is None or pd.isna(low) else f"{low:.3f}–{high:.3f}"


def _print_flaky(outcome: LaneOutcome) -> None:
    """Case predicates whose samples disagree, with their flips (nothing with one sample)."""
    flaky = None if outcome.void else outcome.flaky()
    if flaky is None or flaky.empty:
        return
    out().print(
        f"[bold]flaky within the run[/bold] ({flaky['case_id'].nunique()} case(s) whose samples disagree):",
        highlight=False,
    )
    for row in flaky.head(FAILING_SHOWN).to_dict("records"):
        out().print(
            Text(
                f"  {row['case_id']} · {row['predicate']} · passed {row['passes']}/{row['samples']}"
                f" · {row['flips']} flip(s) · pass^k {row['pass_hat_k']:.3g}"
            ),
            no_wrap=True,
            overflow="ellipsis",
            highlight=False,
        )
    if len(flaky) > FAILING_SHOWN:
        out().print(f"  …and {len(flaky) - FAILING_SHOWN} more", highlight=False, markup=False)


def _print_failing(outcome: LaneOutcome) -> None:
    """The failing cases, hard first, one line each: what failed (at which turn) and why;
    capped, with the rest counted."""
    run = outcome.outcome
    if run is None or not run.failing_results:
        return
    if run.void:  # every result is a fault's echo: the faults below say it once
        out().print(
            f"failing cases: not judged, the run is void; all {run.failing_results} result(s): "
            f"eval-pipeline show {short_id(outcome.run_id)}",
            markup=False,
            highlight=False,
        )
        return
    out().print(
        f"[bold]failing cases[/bold] ({run.failing_cases} case(s), {run.failing_results} result(s)):",
        highlight=False,
    )
    console = out()
    shown = run.failing[:FAILING_SHOWN]
    for item in shown:
        heading = Text.assemble(
            "  ",
            (item.case_id, "bold" if item.severity == "hard" else ""),
            f" · {item.where}" if item.where else "",
            f" · {item.predicate} · {item.severity} · {item.code}",
        )
        console.print(heading, no_wrap=True, overflow="ellipsis", highlight=False)
        console.print(Text(f"      {item.reason}"), no_wrap=True, overflow="ellipsis", highlight=False)
    if run.failing_results > len(shown):
        out().print(
            f"  …and {run.failing_results - len(shown)} more; all of them: "
            f"eval-pipeline show {short_id(outcome.run_id)}",
            highlight=False,
            markup=False,
        )


def _print_faults(outcome: LaneOutcome) -> None:
    """The distinct fault messages of the run's turns, with how many turns each."""
    if outcome.void:
        err().print(f"[{rich_style('void')}]the measurement failed:[/] {escape(outcome.measurement_note)}")
    if outcome.outcome is not None:
        faults = [dict(f) for f in outcome.outcome.faults]
    else:  # a run that broke has no outcome: its faulted turns, as far as it got
        faulted = outcome.faulted_turns()
        faults = [] if faulted is None else fault_counts(faulted)
    if not faults:
        return
    total = sum(f["turns"] for f in faults)
    err().print(f"[bold]faults[/bold] ({total} of {outcome.turns_driven} turns):", highlight=False)
    for fault in faults:
        err().print(Text(f"  {fault['turns']:>4} × {fault_text(fault)}"), highlight=False, soft_wrap=True)


def _suite(outcome: LaneOutcome) -> SuiteRun:
    transcripts = outcome.transcripts if outcome.transcripts is not None else pd.DataFrame()
    case_ids = list(dict.fromkeys(str(c) for c in (transcripts["case_id"] if not transcripts.empty else [])))
    run = outcome.outcome
    return SuiteRun(
        name=outcome.series.label,
        run_id=outcome.run_id,
        case_ids=case_ids,
        failing=() if run is None else run.failing,
        blocked_case_ids=frozenset(case for c in outcome.blocking_failures for case in c.failing_case_ids),
        transcripts=transcripts,
        properties={
            **outcome.series.columns(),
            **{f"check.{c.name}": c.verdict for c in outcome.checks},
            **{
                f"check.{c.name}.void_reason": c.reason
                for c in outcome.checks
                if c.verdict == "void" and c.reason
            },
            **({"failure": outcome.failure} if outcome.failure else {}),
        },
        timestamp=datetime.now(UTC),
        void_reason=outcome.measurement_note if outcome.void else "",
    )


def run_lanes(ctx: typer.Context, request: RunRequest) -> None:
    """``eval-pipeline run`` (:func:`eval_pipeline.cli.run.run`): every selected lane through Dagster,
    each lane run's results printed as it ends; exits with the invocation's code."""
    # One warm pool per invocation: a CPU-bound runtime starts its workers once for every lane
    # (closed when the command ends, however it ends).
    ctx.with_resource(warm_runtimes())
    root = request.history_root
    with bad_input_exits():
        worker_count(), batch_turns()  # settings a run reads deep inside: bad ones are bad input now
        local_folder(root, "--history")
        target = with_history_root(
            find_target(
                default_runtime_spec() if request.runtime is None else request.runtime,  # '' is bad input
                parse_runtime_options(list(request.runtime_options)),
            ),
            root if request.history_given else None,
        )
        # Built once: a bad spec fails here, before any run starts, and every lane drives it.
        built = ctx.with_resource(closing(build_runtime(target.spec, target.options)))
        request.drive.budget_for(target)  # a cost budget without a price is bad input, before anything runs
        # Dagster loads only now, while a worker pool the runtime started loads its runtime.
        with frozen_after():
            from eval_pipeline.dagster_wiring.framework import framework_target
            from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
            from eval_pipeline.dagster_wiring.tags import HIDDEN_TAG_PREFIX

        lane, split = list(request.lanes) or None, request.split
        recording = recording_of(built)
        if recording is not None and (committed := recording.committed_run) is not None:
            # A re-score runs the recorded run's lane and split.
            target = rescore_of(committed, target)
            lane, split = recorded_lane_and_split(
                committed, lane, split, request.drive.repeat, samples_per_case=recording.samples_per_case
            )
        pairs = _framework_selection(_select(lane, split, custom=request.cases is not None), request)
        # A framework lane's runtime is its checkout's version: found now, before anything runs.
        own = {spec.name: framework_target(spec) for spec, _ in pairs if spec.runner is not None}
        notifier = run_notifier(request.notify)
        check_baseline(root, request.baseline)
        if request.cases is not None and len({spec.name for spec, _ in pairs}) != 1:
            raise KeyError("--cases evaluates one lane's contract: name exactly one --lane")
        # Every case file is valid, and its prompts composable, before anything runs.
        prepared = {(spec.name, s): _prepared_cases(ctx, spec, s, request.cases) for spec, s in pairs}
        if recording is not None and recording.committed_run is None:
            pairs = _recorded_pairs(recording, pairs, prepared, named=bool(lane))
        tomorrow = datetime.now(UTC).date() + timedelta(days=1)  # east of UTC it may already be tomorrow
        day = run_night(request.date or datetime.now(UTC).date().isoformat(), latest=tomorrow)
        executor = _executor(request, target)
    if not target.declared and not request.as_json:  # a derived name says nothing of what it runs
        err().print(
            f"runtime {target.name}: {stands_for(target.spec, target.options)} (not declared in evals/runtimes.yaml)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    with frozen_after():  # the instance's storages import their SQL layer
        instance = ensure_instance()
    batch_id = uuid.uuid4().hex
    tags = {f"{HIDDEN_TAG_PREFIX}batch_id": batch_id, f"{HIDDEN_TAG_PREFIX}source": "cli"}
    outcomes: list[LaneOutcome] = []
    for spec, s in pairs:
        framework = spec.name in own  # a framework lane runs its checkout, no chat runtime
        lane_target = own.get(spec.name, target)
        with rich_progress(f"{spec.name} [{s}] · {lane_target.name}", console=err()) as bar:
            outcome = materialize_lane(
                spec,
                lane_target,
                request.for_lane(s, day, executor, tags),
                instance=instance,
                progress=bar,
                observe=not outcomes and not framework,  # the target's version, once per invocation
                chat_runtime=None if framework else built,
                prepared_cases=prepared[(spec.name, s)],
            )
        outcomes.append(outcome)
        if not request.as_json:
            sessions = 1 if framework else in_flight(built, request.drive.concurrency_for(lane_target))
            _print(outcome, split_spec(target.spec)[0], sessions)
    _write_outputs(request, batch_id, outcomes, notifier, night=day, instance=instance)
    raise typer.Exit(_exit_code(outcomes, summary=not request.as_json))


def _framework_selection(
    pairs: list[tuple[LaneSpec, str]], request: RunRequest
) -> list[tuple[LaneSpec, str]]:
    """The lane runs to start: a framework lane runs its own checkout, so with ``--runtime``
    (or a custom case file, or Celery) it is bad input when named and left out otherwise."""
    if request.runtime is None and request.cases is None and request.executor != "celery":
        return pairs
    framework = [spec.name for spec, _ in pairs if spec.runner is not None]
    if framework and request.lanes:
        raise KeyError(
            f"lane(s) {sorted(set(framework))} run their framework checkout: run them without --runtime, "
            "--cases or --executor celery"
        )
    return [(spec, split) for spec, split in pairs if spec.runner is None]


def _executor(request: RunRequest, target: RuntimeTarget) -> str:
    """Where the steps run: ``--executor``, else celery when EVAL_PIPELINE_EXECUTOR says so, else
    in process. Celery needs a broker, and a spec without secrets (its run config is stored)."""
    from eval_pipeline.dagster_wiring.code_location import EXECUTOR_ENV
    from eval_pipeline.dagster_wiring.launch import check_celery_spec

    executor = request.executor or ("celery" if os.environ.get(EXECUTOR_ENV) == "celery" else "in_process")
    if executor == "celery":
        check_celery_spec(target)
        if not celery_broker():
            raise KeyError(
                f"--executor celery needs a broker: set {CELERY_BROKER_ENV} (e.g. redis://host:6379/0)"
            )
    return executor


def _write_outputs(
    request: RunRequest,
    batch_id: str,
    outcomes: list[LaneOutcome],
    notifier: RunNotifier | None,
    *,
    night: str,
    instance: Any,
) -> None:
    """What the invocation writes besides its tables: the JSON document, the notifications (of
    the night, through the instance), the CI summary, the JUnit file."""
    if request.as_json:
        typer.echo(json.dumps(_document(batch_id, outcomes), indent=2, sort_keys=False))
    if notifier is not None:
        notifier.send(outcomes, night=night, instance=instance, history_root=request.history_root)
    if request.summary_md is not None:
        write_summary(
            request.summary_md, outcomes, history_root=request.history_root, baseline=request.baseline
        )
    if request.junit is not None:
        request.junit.parent.mkdir(parents=True, exist_ok=True)
        request.junit.write_text(junit_xml([_suite(o) for o in outcomes]), encoding="utf-8")
        err().print(f"wrote JUnit XML to {request.junit}", markup=False, highlight=False, soft_wrap=True)


# A step's failure is known by its exception's class name: these are bad input (exit 2).
BAD_INPUT_KINDS = {error.__name__ for error in (RuntimeSpecError, CaseFileError, TargetsFileError)}


def _exit_code(outcomes: list[LaneOutcome], *, summary: bool) -> int:
    """2 bad input, 3 a stage raised, 4 a measurement failed (void), 1 a blocking check failed, else 0."""
    if any(o.failure is not None and not o.budget_reached for o in outcomes):
        kinds = {o.failure_kind for o in outcomes if o.failure is not None and not o.budget_reached}
        return EXIT_BAD_INPUT if kinds & BAD_INPUT_KINDS else EXIT_RUN_FAILED
    void = [o for o in outcomes if o.void]
    blocking = [(o, c) for o in outcomes for c in o.blocking_failures]
    if summary:
        measured = [c for o in outcomes if not o.void for c in o.checks]
        warnings = sum(c.verdict == "warn" for c in measured)
        line = (
            f"{len(outcomes)} lane run(s); {len(blocking)} blocking check failure(s); {warnings} warning(s)"
        )
        unmeasured = sum(c.verdict == "void" for c in measured)
        if unmeasured:
            line += f"; {unmeasured} check(s) not measured (void)"
        if void:
            line += f"; {len(void)} void (the measurement failed: {', '.join(o.lane for o in void)})"
        style = rich_style("void" if void else "fail" if blocking else "pass")
        out().print(f"[{style}]{escape(line)}[/]", highlight=False)
        measured_runs = [_usage(o) for o in outcomes if o.metrics is not None]
        if measured_runs:  # the last line: what the invocation sent, and spent
            out().print(f"usage: {escape(totals_text(summed_usage(measured_runs)))}", highlight=False)
    if void:
        return EXIT_VOID
    return EXIT_CHECK_FAILED if blocking else EXIT_OK
