"""One factory turns a lane spec into its asset group: cases → transcripts →
turn_predicates → case_predicates → metrics → history, with the lane's threshold checks on
metrics and its regression check on history.

Every asset body is a few lines that call :mod:`eval_pipeline.run.pipeline` and
:mod:`eval_pipeline.history`; the logic lives there and in the lane's kind, where it is
tested without Dagster. A partition is one series (case set × runtime target, see
:mod:`eval_pipeline.dagster_wiring.partitions`).
"""

# No `from __future__ import annotations` here: Dagster reads these annotations (config and
# resource parameters) at definition time and cannot resolve them from strings.
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa

from eval_pipeline import __version__
from eval_pipeline.core import Series, content_sha256
from eval_pipeline.dagster_wiring.checks import (
    gate_check_result,
    gate_check_spec,
    measurement_check_result,
    measurement_check_spec,
    regression_check_result,
    regression_check_spec,
    regression_outcome,
    series_label,
    threshold_check_results,
    threshold_check_specs,
)
from eval_pipeline.dagster_wiring.framework import framework_transcripts_asset, lane_target
from eval_pipeline.dagster_wiring.partitions import CUSTOM_PREFIX, custom_case_set, lane_partitions, series_of
from eval_pipeline.dagster_wiring.resources import HistoryResource, PreparedCases, RunRuntime
from eval_pipeline.dagster_wiring.runtime_targets import runtime_pool_slot, transcripts_runtime_dep
from eval_pipeline.dagster_wiring.tags import DATE_TAG, VERDICT_TAG
from eval_pipeline.history import append_run, commit_run, find_regressions, lane_chart_markdown
from eval_pipeline.history.store import is_committed
from eval_pipeline.history.views import connect
from eval_pipeline.lanes import LaneSpec, lane_kind
from eval_pipeline.metrics import FLAKY_READS, MetricValue, flaky_within_run, samples_in
from eval_pipeline.outcome import FAILING_READS, FirstFailing, RunOutcome, failing_cases, judge_run, rounded
from eval_pipeline.report import markdown_table
from eval_pipeline.run import (
    Books,
    FanOut,
    JournalIdentity,
    Journaling,
    LogProgress,
    ProgressObserver,
    RunLedger,
    Sending,
    StageOutput,
    cases_sha256,
    drive_cases,
    measure,
    metric_rows,
    remove_journals,
    samples_to_drive,
    score_cases,
    score_turns,
    transcripts_ledger,
    write_cases,
)
from eval_pipeline.runtimes import ChatRuntime, RuntimeSpecError
from eval_pipeline.runtimes.budget import Budget
from eval_pipeline.runtimes.cache import ResponseCache, target_cache
from eval_pipeline.runtimes.names import stored_options
from eval_pipeline.runtimes.redaction import redacted_spec
from eval_pipeline.runtimes.targets import RuntimeTarget
from eval_pipeline.tables import (
    CASE_PREDICATES,
    CASES,
    COLUMN_DESCRIPTIONS,
    JSON_TEXT,
    METRICS,
    OUTCOME_ATTR,
    RUN_MANIFESTS,
    TRANSCRIPTS,
    TURN_PREDICATES,
    StageFile,
    faulted,
    frame,
)
from eval_pipeline.viewer import run_page_url

STAGES = ("cases", "transcripts", "turn_predicates", "case_predicates", "metrics", "history")
MAX_FAILING_ROWS = 50
PROGRESS_EVERY_SECONDS = 10.0
OUTCOME_METADATA = "outcome"  # the committed run's outcome, as history stores it
JOURNAL_METADATA = "journal"  # what the transcripts step says of its journal (resumed, started afresh)
# Nightly at 02:00 plus a night's slack: a lane whose metrics are older has missed a night.
METRICS_FRESHNESS = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=26))


def viewer_link(run_id: str) -> dict[str, dg.MetadataValue]:
    """``viewer``: the run's page in ``eval-pipeline view``, when ``EVAL_PIPELINE_VIEWER_URL`` says where."""
    url = run_page_url(run_id)
    return {} if url is None else {"viewer": dg.MetadataValue.url(url)}


def cache_metadata(cache: ResponseCache) -> dict[str, Any]:
    """What the response cache did for a run: sessions answered from it, sent, and entries skipped as corrupt."""
    counts = cache.counts
    return {
        "cache_sessions_hit": counts.hits,
        "cache_sessions_sent": counts.misses,
        "cache_entries_skipped": counts.skipped,
        "runtime_version": cache.runtime_version,
    }


class CasesConfig(dg.Config):
    """Run config of a lane's cases asset (only for a ``custom-<hash>`` case set)."""

    cases_path: str = ""
    """The custom case file, evaluated under the lane's contract; its content hash must be the
    partition's case set."""
    split: str = ""
    """The lane split whose rules a custom case file runs under; default: the first nightly split."""


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    """The table's columns with their types and what each holds (shown in the UI)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                f.name, "json" if f.type == JSON_TEXT else str(f.type), COLUMN_DESCRIPTIONS[f.name]
            )
            for f in schema
        ]
    )


def failing_cases_markdown(failing: FirstFailing) -> str:
    """A markdown table of the first failing case predicates (hard first), for the UI."""
    if not failing.results:
        return "No failing case predicates."
    return markdown_table(
        failing.rows.to_dict("records"),
        ("case_id", "predicate", "severity", "code", "reason"),
        limit=MAX_FAILING_ROWS,
        more="rows in the case_predicates table",
        total=failing.results,
    )


def _run_columns(context: dg.AssetExecutionContext, spec: LaneSpec, cases: StageFile) -> dict[str, str]:
    """run_id and the series of this run: lane, split (from the cases), runtime, case set."""
    case_set, runtime = series_of(context.partition_key)
    splits = cases.distinct("split")
    return {
        "run_id": context.run.run_id,
        "lane": spec.name,
        "split": str(splits[0]) if len(splits) else "",
        "runtime": runtime,
        "case_set": case_set,
    }


def _run_started_at(context: dg.AssetExecutionContext) -> datetime:
    stats = context.instance.get_run_stats(context.run.run_id)
    started = stats.start_time if stats is not None else None
    return datetime.fromtimestamp(started, UTC) if started else datetime.now(UTC)


def _night(context: dg.AssetExecutionContext) -> str:
    """The night a run belongs to: its ``eval_pipeline/date`` tag, else the day it started (UTC),
    which a run launched without the tag (from the UI's launchpad) is then tagged with, so every
    run shows its night."""
    tagged = context.run.tags.get(DATE_TAG)
    if tagged:
        return tagged
    night = _run_started_at(context).strftime("%Y-%m-%d")
    context.instance.add_run_tags(context.run_id, {DATE_TAG: night})
    return night


def _case_files(spec: LaneSpec, case_set: str, config: CasesConfig) -> tuple[str, str | None]:
    """(split, custom case file or None) of a partition's case set, checked against the config."""
    if case_set.startswith(CUSTOM_PREFIX):
        if not config.cases_path:
            raise RuntimeSpecError(
                f"case set {case_set!r} is a custom case file: give its path as the cases asset's cases_path"
            )
        actual = custom_case_set(config.cases_path)
        if actual != case_set:
            raise RuntimeSpecError(
                f"{config.cases_path} is case set {actual!r}, not the partition's {case_set!r}: "
                "pick the partition that matches the file"
            )
        return config.split or spec.nightly_splits[0], config.cases_path
    if config.cases_path:
        raise RuntimeSpecError(
            f"partition case set {case_set!r} is the split's own files; a custom case file runs under "
            f"case set {custom_case_set(config.cases_path)!r}"
        )
    if case_set not in spec.splits:
        raise RuntimeSpecError(f"lane {spec.name!r} has no split {case_set!r}; it has {sorted(spec.splits)}")
    return case_set, None


def lane_assets(spec: LaneSpec) -> list[dg.AssetsDefinition]:
    """The asset group of one lane (key prefix and group name = the lane's name)."""
    lane = _Lane.of(spec)
    return [
        _cases_asset(lane),
        # A framework lane's transcripts are one run of its upstream runner (no chat runtime).
        _transcripts_asset(lane)
        if spec.runner is None
        else framework_transcripts_asset(spec, lane.ins("cases"), lane.common, column_schema(TRANSCRIPTS)),
        _turn_predicates_asset(lane),
        _case_predicates_asset(lane),
        _metrics_asset(lane),
        _history_asset(lane),
    ]


@dataclass(frozen=True)
class _Lane:
    """What every asset of a lane's group shares: the lane, its stages' keys, its partitions,
    and the arguments every stage asset is declared with."""

    spec: LaneSpec
    keys: dict[str, dg.AssetKey]
    partitions: dg.PartitionsDefinition
    prefix: list[str]
    common: dict[str, Any]

    @classmethod
    def of(cls, spec: LaneSpec) -> "_Lane":
        partitions = lane_partitions(spec)
        prefix = [spec.name]
        return cls(
            spec,
            {stage: dg.AssetKey([*prefix, stage]) for stage in STAGES},
            partitions,
            prefix,
            {
                "key_prefix": prefix,
                "group_name": spec.name,
                "partitions_def": partitions,
                "io_manager_key": "tables_io_manager",
            },
        )

    def ins(self, *stages: str) -> dict[str, dg.AssetIn]:
        """The lane's upstream stages an asset reads, by their parameter names."""
        return {stage: dg.AssetIn(self.keys[stage]) for stage in stages}


def _cases_asset(lane: _Lane) -> dg.AssetsDefinition:
    spec = lane.spec
    common = lane.common

    @dg.asset(
        name="cases",
        description=f"Validated cases of {spec.title} ({spec.version}), one row per case.",
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": column_schema(CASES)},
        **common,
    )
    def cases(
        context: dg.AssetExecutionContext,
        config: CasesConfig,
        prepared_cases: dg.ResourceParam[PreparedCases],
    ) -> dg.Output[StageFile]:
        case_set, _ = series_of(context.partition_key)
        split, cases_path = _case_files(spec, case_set, config)
        prepared = prepared_cases.file
        table = prepared if prepared is not None else write_cases(spec, split, cases_path)
        return dg.Output(
            table,
            metadata={
                "dagster/row_count": table.row_count,
                "batches": table.batch_count,
                "files": dg.MetadataValue.json(sorted(table.distinct("file"))),
            },
        )

    return cases


def _transcripts_asset(lane: _Lane) -> dg.AssetsDefinition:
    spec = lane.spec
    common = lane.common
    ins = lane.ins

    @dg.asset(
        name="transcripts",
        description="Every turn sent to the runtime and what it answered (faults recorded per turn).",
        ins=ins("cases"),
        deps=[transcripts_runtime_dep()],
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": column_schema(TRANSCRIPTS)},
        **common,
    )
    def transcripts(
        context: dg.AssetExecutionContext,
        runtime: dg.ResourceParam[RunRuntime],
        history: HistoryResource,
        progress: dg.ResourceParam[ProgressObserver],
        cases: StageFile,
    ) -> dg.Output[StageFile]:
        run_columns = _run_columns(context, spec, cases)
        target = runtime.target(run_columns["runtime"])
        settings = runtime.settings
        budget = settings.budget_for(target)  # refused before the runtime is built: no price, no cost budget
        # The slot first: a runtime may start processes or open connections when it is built.
        step_key = context.get_step_execution_context().step.key
        with (
            runtime_pool_slot(context.instance, context.run, step_key, target, context.log),
            runtime.chat_runtime(target) as chat_runtime,
        ):
            cache = target_cache(target.spec, target.options) if settings.caches(target) else None
            samples = samples_to_drive(chat_runtime, settings.samples_for(target, spec.repeat))
            identity = JournalIdentity(
                lane=spec.name,
                split=run_columns["split"],
                case_set=run_columns["case_set"],
                cases_sha256=cases_sha256(cases, spec.name, spec.version),
                runtime=target.name,
                # The cache's, when it has one (asked once); else told by the ledger.
                runtime_version=None if cache is None else cache.runtime_version,
                samples=samples,
                seed=settings.seed,
            )
            ledger = _ledger(
                context, runtime, history.resolved_root(), chat_runtime, identity, target, budget
            )
            try:
                context.log.info(
                    f"driving {target.name} ({redacted_spec(chat_runtime.spec)}) over {cases.row_count} cases"
                )
                observers = FanOut(
                    LogProgress(context.log, every_s=PROGRESS_EVERY_SECONDS, label=spec.name), progress
                )
                table = drive_cases(
                    spec,
                    run_columns["split"],
                    cases,
                    chat_runtime,
                    Sending(concurrency=settings.concurrency_for(target), repeat=samples, seed=settings.seed),
                    Books(ledger=ledger, cache=cache, price=target.price),
                    progress=observers,
                    output=StageOutput(run_columns),
                )
            finally:
                if ledger is not None:
                    ledger.close()
                if cache is not None:
                    cache.close()
        if note := ledger.note if ledger is not None else "":
            context.log.info(note)
        return dg.Output(
            table, metadata=_transcripts_metadata(table, target.name, chat_runtime.spec, note, cache)
        )

    return transcripts


def _metrics_metadata(
    values: Sequence[MetricValue], series: str, outcome: RunOutcome, rows: int
) -> dict[str, Any]:
    """The metrics materialization's metadata: each metric's value, plotted per series (the
    asset's plots draw every materialization of a label as one line, so a label shared by two
    runtime targets would zigzag between them), the metrics that could not be computed, and
    whether the run measured its runtime."""
    return {
        **{
            series_label(m.metric, series): dg.MetadataValue.float(rounded(m.value))
            for m in values
            if m.value is not None
        },
        "missing_metrics": dg.MetadataValue.json([m.metric for m in values if m.value is None]),
        "runtime": outcome.runtime,
        "measurement": "void" if outcome.void else "measured",
        "dagster/row_count": rows,
        **viewer_link(outcome.run_id),
    }


def _ledger(
    context: dg.AssetExecutionContext,
    runtime: RunRuntime,
    history_root: str,
    chat_runtime: ChatRuntime,
    identity: JournalIdentity,
    target: RuntimeTarget,
    budget: Budget,
) -> RunLedger | None:
    """The transcripts step's ledger (journal, ``budget``): resumed from the series' interrupted
    run when asked, or when the run re-executes a failed one; refusing a committed run's journal."""
    settings = runtime.settings
    journaling = Journaling(
        settings.journal_root(context.instance),
        context.run.run_id,
        resume=settings.resume or context.run.parent_run_id is not None,  # a re-execution resumes
        parent_run_id=context.run.parent_run_id,
        is_committed=partial(is_committed, history_root, identity.lane),
    )
    return transcripts_ledger(chat_runtime, target, identity, journaling, budget, context.log)


def _transcripts_metadata(
    table: StageFile, runtime: str, spec: str, journal_note: str, cache: ResponseCache | None
) -> dict[str, Any]:
    """What the transcripts step says of its run: turns and faults, the runtime it drove (its
    spec redacted), its journal and its response cache."""
    return {
        "dagster/row_count": table.row_count,
        "turns": table.row_count,
        "errors": len(table.read(["case_id", "error"], where=faulted())),
        "runtime": runtime,
        "runtime_spec": redacted_spec(spec),
        **({JOURNAL_METADATA: journal_note} if journal_note else {}),
        **({} if cache is None else cache_metadata(cache)),
    }


def _turn_predicates_asset(lane: _Lane) -> dg.AssetsDefinition:
    spec = lane.spec
    common = lane.common
    ins = lane.ins

    @dg.asset(
        name="turn_predicates",
        description="Per-turn predicate verdicts (long table; passed is null where not applicable).",
        ins=ins("cases", "transcripts"),
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": column_schema(TURN_PREDICATES)},
        **common,
    )
    def turn_predicates(
        context: dg.AssetExecutionContext, cases: StageFile, transcripts: StageFile
    ) -> dg.Output[StageFile]:
        table = score_turns(spec, cases, transcripts, _run_columns(context, spec, cases))
        return dg.Output(table, metadata={"dagster/row_count": table.row_count})

    return turn_predicates


def _case_predicates_asset(lane: _Lane) -> dg.AssetsDefinition:
    spec = lane.spec
    common = lane.common
    ins = lane.ins

    @dg.asset(
        name="case_predicates",
        description="Per-case predicate and assertion results, with severity, stable code and evidence.",
        ins=ins("cases", "transcripts", "turn_predicates"),
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": column_schema(CASE_PREDICATES)},
        **common,
    )
    def case_predicates(
        context: dg.AssetExecutionContext,
        cases: StageFile,
        transcripts: StageFile,
        turn_predicates: StageFile,
    ) -> dg.Output[StageFile]:
        table = score_cases(spec, cases, transcripts, turn_predicates, _run_columns(context, spec, cases))
        failing = failing_cases(
            table.batches(FAILING_READS), samples_in(table), MAX_FAILING_ROWS, table.batch
        )
        return dg.Output(
            table,
            metadata={
                "dagster/row_count": table.row_count,
                "failing_cases": dg.MetadataValue.md(failing_cases_markdown(failing)),
            },
        )

    return case_predicates


def _metrics_asset(lane: _Lane) -> dg.AssetsDefinition:
    spec = lane.spec
    keys = lane.keys
    partitions = lane.partitions
    common = lane.common
    ins = lane.ins

    @dg.asset(
        name="metrics",
        description=spec.contract_text() or spec.description,
        ins=ins("cases", "transcripts", "turn_predicates", "case_predicates"),
        check_specs=[
            measurement_check_spec(spec, keys["metrics"], partitions),
            *threshold_check_specs(spec, keys["metrics"], partitions),
        ],
        freshness_policy=METRICS_FRESHNESS,
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": column_schema(METRICS)},
        **common,
    )
    def metrics(
        context: dg.AssetExecutionContext,
        runtime: dg.ResourceParam[RunRuntime],
        cases: StageFile,
        transcripts: StageFile,
        turn_predicates: StageFile,
        case_predicates: StageFile,
    ) -> Iterator[dg.Output[pd.DataFrame] | dg.AssetCheckResult]:
        values = measure(spec, cases, transcripts, turn_predicates, case_predicates)
        run_columns = _run_columns(context, spec, cases)
        verdicts, outcome = judge_run(
            spec,
            Series.from_row(run_columns),
            run_columns["run_id"],
            values,
            lane_target(spec, runtime, run_columns["runtime"]).error_budget(spec.max_error_rate),
            (case_predicates, turn_predicates, transcripts),
        )
        table = frame(
            METRICS,
            metric_rows(values, verdicts),
            **run_columns,
            partition_date=_night(context),
            started_at=_run_started_at(context),
            cases_sha256=content_sha256([Path(f) for f in cases.distinct("file")]),
            pipeline_version=__version__,
        )
        table.attrs[OUTCOME_ATTR] = outcome.to_json()  # the history step completes and stores it
        series = context.partition_key
        yield dg.Output(table, metadata=_metrics_metadata(values, series, outcome, len(table)))
        yield measurement_check_result(outcome, series=series)
        yield from threshold_check_results(
            outcome,
            flaky=flaky_within_run(case_predicates.batches(FLAKY_READS), samples_in(case_predicates)),
            series=series,
            links=viewer_link(run_columns["run_id"]),
            metric_rows=lane_kind(spec).metric_rows,
        )

    return metrics


def _history_asset(lane: _Lane) -> dg.AssetsDefinition:
    spec = lane.spec
    keys = lane.keys
    partitions = lane.partitions
    prefix = lane.prefix
    ins = lane.ins

    @dg.asset(
        name="history",
        description="Appends this run's metrics, case predicates, turn verdicts and transcripts to the "
        "Parquet history, then its manifest (a run is visible to history queries only once that is written).",
        ins=ins("metrics", "case_predicates", "turn_predicates", "transcripts"),
        check_specs=[
            regression_check_spec(keys["history"], partitions),
            gate_check_spec(keys["history"], partitions),
        ],
        kinds={"parquet", "duckdb"},
        key_prefix=prefix,
        group_name=spec.name,
        partitions_def=partitions,
    )
    def history_asset(
        context: dg.AssetExecutionContext,
        history: HistoryResource,
        runtime: dg.ResourceParam[RunRuntime],
        metrics: pd.DataFrame,
        case_predicates: StageFile,
        turn_predicates: StageFile,
        transcripts: StageFile,
    ) -> dg.MaterializeResult:
        row = metrics.iloc[0]
        series = Series.from_row(row)
        root = history.resolved_root()
        # The regression reads the previous run's files (before this run is committed), the trend
        # every metrics file of the lane (after).
        findings = find_regressions(
            root,
            series=series,
            metrics=metrics,
            case_predicates=case_predicates,
            metric_rows=lane_kind(spec).metric_rows,
            turn_verdicts=turn_predicates,
            transcripts=transcripts,
            alpha=spec.regression_alpha,
        )
        stored = _history_tables(
            metrics, case_predicates, turn_predicates, transcripts if history.keep_transcripts else None
        )
        judged = RunOutcome.from_json(metrics.attrs[OUTCOME_ATTR])
        regression = regression_outcome(findings, void=judged.void)
        outcome = judged.with_check(regression)
        outcome_json = outcome.to_json()
        target = lane_target(spec, runtime, series.runtime)
        manifest = _manifest(target, context.run.job_name, outcome_json)
        _commit_to_history(root, spec.name, row, series, stored, manifest)
        # Committed: nothing of the series is left to resume. Removed at once, and a journal
        # a kill left behind here is refused by --resume (its run id is committed).
        remove_journals(
            runtime.settings.journal_root(context.instance), spec.name, series.case_set, series.runtime
        )
        with connect(root, lane=spec.name, tables=("metrics",)) as con:  # this run too
            trend = lane_chart_markdown(con, spec.name)
        # The Runs page tells a measured failure (verdict fail, run succeeded) from a broken run.
        context.instance.add_run_tags(context.run_id, {VERDICT_TAG: outcome.verdict})
        return dg.MaterializeResult(
            metadata={
                "history_root": root,
                "tables": dg.MetadataValue.json(sorted(stored)),
                "trend": dg.MetadataValue.md(trend),
                OUTCOME_METADATA: dg.MetadataValue.json(json.loads(outcome_json)),
            },
            check_results=[regression_check_result(regression, findings), gate_check_result(outcome)],
        )

    return history_asset


def _history_tables(
    metrics: pd.DataFrame,
    case_predicates: StageFile,
    turn_predicates: StageFile,
    transcripts: StageFile | None,
) -> dict[str, pd.DataFrame | StageFile]:
    """The run's tables history keeps, by history table: ``turn_verdicts`` are the turn
    predicates without code and evidence (tables.TURN_VERDICTS); transcripts when kept."""
    stored: dict[str, pd.DataFrame | StageFile] = {
        "metrics": metrics,
        "case_predicates": case_predicates,
        "turn_verdicts": turn_predicates,
    }
    return stored if transcripts is None else {**stored, "transcripts": transcripts}


def _manifest(target: RuntimeTarget, job: str, outcome_json: str) -> dict[str, str | None]:
    """The manifest's fields only the history step knows: what ran (the target's spec and
    options, redacted: a derived name is decoded from them), the job and the run's outcome."""
    return {
        "runtime_spec": redacted_spec(target.spec),
        "runtime_options": stored_options(target.options),
        "dagster_job": job,
        "outcome": outcome_json,
    }


def _commit_to_history(
    root: str,
    lane: str,
    row: pd.Series,
    series: Series,
    stored: dict[str, pd.DataFrame | StageFile],
    manifest: dict[str, str | None],
) -> None:
    """Append the run's ``stored`` tables to history, then its manifest (the commit); ``row``
    is a metrics row of the run, ``manifest`` the manifest's fields that only the step knows."""
    run_id, night = str(row["run_id"]), str(row["partition_date"])
    for name, rows in stored.items():
        append_run(root, name, rows, lane=lane, date=night, run_id=run_id)
    record = {
        **manifest,
        "partition_date": night,
        "started_at": row["started_at"],
        "committed_at": datetime.now(UTC),
        "cases_sha256": row["cases_sha256"],
        "pipeline_version": row["pipeline_version"],
        "tables": ",".join(stored),
    }
    commit_run(
        root,
        frame(RUN_MANIFESTS, [record], run_id=run_id, **series.columns()),
        lane=lane,
        date=night,
        run_id=run_id,
    )
