"""One factory turns a lane spec into its asset group: cases → transcripts →
turn_predicates → case_predicates → metrics, with the lane's checks on metrics.

Every asset body is a few lines that call :mod:`eval_pipeline.pipeline`; the logic lives
there and in the lane's kind, where it is tested without Dagster.
"""

# No `from __future__ import annotations` here: Dagster reads these annotations (config and
# resource parameters) at definition time and cannot resolve them from strings.
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa

from eval_pipeline import __version__
from eval_pipeline.dagster_wiring.checks import (
    lane_check_specs,
    regression_check_result,
    threshold_check_results,
)
from eval_pipeline.dagster_wiring.markdown import markdown_table
from eval_pipeline.dagster_wiring.partitions import date_and_split, lane_partitions
from eval_pipeline.dagster_wiring.resources import HistoryResource, RuntimeResource
from eval_pipeline.drive import drive
from eval_pipeline.history import append_run, find_regressions, lane_chart_markdown
from eval_pipeline.lanes.kind import lane_kind
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.pipeline import (
    case_predicate_table,
    cases_frame,
    cases_from_frame,
    cases_sha256,
    check_thread_ids,
    load_split,
    metric_rows,
    metric_values,
    turn_predicate_table,
)
from eval_pipeline.progress import LogProgress, with_observers
from eval_pipeline.tables import (
    CASE_PREDICATES,
    METRICS,
    TRANSCRIPTS,
    TURN_PREDICATES,
    frame,
    with_run_columns,
)

STAGES = ("cases", "transcripts", "turn_predicates", "case_predicates", "metrics")
MAX_FAILING_ROWS = 50
PROGRESS_EVERY_SECONDS = 10.0


class CasesConfig(dg.Config):
    """Run config of a lane's cases asset."""

    cases_path: str = ""
    """Evaluate this case file under the lane's contract instead of the split's own files."""


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(f.name, str(f.type)) for f in schema])


def failing_cases_markdown(case_predicates: pd.DataFrame) -> str:
    """A markdown table of the failing case predicates (hard first), capped for the UI."""
    failing = case_predicates[case_predicates["passed"].eq(False).fillna(False)]
    if failing.empty:
        return "No failing case predicates."
    failing = failing.sort_values(["severity", "case_id", "predicate"], key=lambda s: s.astype(str))
    return markdown_table(
        failing.to_dict("records"),
        ("case_id", "predicate", "severity", "code", "message"),
        limit=MAX_FAILING_ROWS,
        more="rows in the case_predicates table",
    )


def _run_columns(context: dg.AssetExecutionContext, spec: LaneSpec, runtime: str) -> dict[str, str]:
    _, split = date_and_split(context.partition_key)
    return {"run_id": context.run.run_id, "lane": spec.name, "split": split, "runtime": runtime}


def _run_started_at(context: dg.AssetExecutionContext) -> datetime:
    stats = context.instance.get_run_stats(context.run.run_id)
    started = stats.start_time if stats is not None else None
    return datetime.fromtimestamp(started, UTC) if started else datetime.now(UTC)


def lane_assets(spec: LaneSpec) -> list[dg.AssetsDefinition]:
    """The asset group of one lane (key prefix and group name = the lane's name)."""
    kind = lane_kind(spec.kind)
    partitions = lane_partitions(spec)
    prefix = [spec.name]
    keys = {stage: dg.AssetKey([*prefix, stage]) for stage in STAGES}
    common: dict[str, Any] = {
        "key_prefix": prefix,
        "group_name": spec.name,
        "partitions_def": partitions,
        "io_manager_key": "tables_io_manager",
    }

    @dg.asset(
        name="cases",
        description=f"Validated cases of {spec.title} ({spec.version}), one row per case.",
        kinds={"python", "parquet"},
        **common,
    )
    def cases(context: dg.AssetExecutionContext, config: CasesConfig) -> dg.Output[pd.DataFrame]:
        _, split = date_and_split(context.partition_key)
        loaded = load_split(spec, split, config.cases_path or None)
        table = cases_frame(loaded, split)
        return dg.Output(
            table,
            metadata={
                "dagster/row_count": len(table),
                "files": dg.MetadataValue.json(sorted(set(table["file"]))),
            },
        )

    @dg.asset(
        name="transcripts",
        description="Every turn sent to the runtime and what it answered (faults recorded per turn).",
        ins={"cases": dg.AssetIn(keys["cases"])},
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": column_schema(TRANSCRIPTS)},
        **common,
    )
    def transcripts(
        context: dg.AssetExecutionContext, runtime: RuntimeResource, cases: pd.DataFrame
    ) -> dg.Output[pd.DataFrame]:
        _, split = date_and_split(context.partition_key)
        case_models = cases_from_frame(kind, cases)
        threads = kind.threads(case_models, spec, split)
        check_thread_ids(case_models, threads)
        chat_runtime = runtime.build()
        try:
            context.log.info(f"driving {chat_runtime.spec} over {len(threads)} cases")
            progress = with_observers(
                LogProgress(context.log, every_s=PROGRESS_EVERY_SECONDS, label=spec.name)
            )
            table = drive(
                chat_runtime,
                threads,
                concurrency=runtime.concurrency,
                on_turn=progress,
                on_start=progress.start,
            )
        finally:
            chat_runtime.close()
        errors = int(table["error"].notna().sum())
        table = with_run_columns(table, TRANSCRIPTS, **_run_columns(context, spec, chat_runtime.spec))
        return dg.Output(
            table,
            metadata={
                "dagster/row_count": len(table),
                "turns": len(table),
                "errors": errors,
                "runtime": chat_runtime.spec,
            },
        )

    @dg.asset(
        name="turn_predicates",
        description="Per-turn predicate verdicts (long table; passed is null where not applicable).",
        ins={"cases": dg.AssetIn(keys["cases"]), "transcripts": dg.AssetIn(keys["transcripts"])},
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": column_schema(TURN_PREDICATES)},
        **common,
    )
    def turn_predicates(
        context: dg.AssetExecutionContext, cases: pd.DataFrame, transcripts: pd.DataFrame
    ) -> dg.Output[pd.DataFrame]:
        table = turn_predicate_table(kind, cases_from_frame(kind, cases), transcripts)
        table = with_run_columns(
            table, TURN_PREDICATES, **_run_columns(context, spec, _runtime_of(transcripts))
        )
        return dg.Output(table, metadata={"dagster/row_count": len(table)})

    @dg.asset(
        name="case_predicates",
        description="Per-case predicate and assertion results, with severity, stable code and evidence.",
        ins={
            "cases": dg.AssetIn(keys["cases"]),
            "transcripts": dg.AssetIn(keys["transcripts"]),
            "turn_predicates": dg.AssetIn(keys["turn_predicates"]),
        },
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": column_schema(CASE_PREDICATES)},
        **common,
    )
    def case_predicates(
        context: dg.AssetExecutionContext,
        cases: pd.DataFrame,
        transcripts: pd.DataFrame,
        turn_predicates: pd.DataFrame,
    ) -> dg.Output[pd.DataFrame]:
        case_models = cases_from_frame(kind, cases)
        table = case_predicate_table(kind, case_models, transcripts, turn_predicates)
        table = with_run_columns(
            table, CASE_PREDICATES, **_run_columns(context, spec, _runtime_of(transcripts))
        )
        return dg.Output(
            table,
            metadata={
                "dagster/row_count": len(table),
                "failing_cases": dg.MetadataValue.md(failing_cases_markdown(table)),
            },
        )

    @dg.asset(
        name="metrics",
        description=spec.contract_text() or spec.description,
        ins={
            "cases": dg.AssetIn(keys["cases"]),
            "transcripts": dg.AssetIn(keys["transcripts"]),
            "turn_predicates": dg.AssetIn(keys["turn_predicates"]),
            "case_predicates": dg.AssetIn(keys["case_predicates"]),
        },
        check_specs=lane_check_specs(spec, keys["metrics"]),
        kinds={"python", "parquet", "duckdb"},
        metadata={"dagster/column_schema": column_schema(METRICS)},
        **common,
    )
    def metrics(
        context: dg.AssetExecutionContext,
        history: HistoryResource,
        cases: pd.DataFrame,
        transcripts: pd.DataFrame,
        turn_predicates: pd.DataFrame,
        case_predicates: pd.DataFrame,
    ) -> Iterator[dg.Output[pd.DataFrame] | dg.AssetCheckResult]:
        date, _ = date_and_split(context.partition_key)
        case_models = cases_from_frame(kind, cases)
        values = metric_values(kind, case_models, transcripts, turn_predicates, case_predicates)
        run_columns = _run_columns(context, spec, _runtime_of(transcripts))
        table = frame(
            METRICS,
            metric_rows(values, spec.effective_thresholds),
            **run_columns,
            partition_date=date,
            started_at=_run_started_at(context),
            cases_sha256=cases_sha256([Path(f) for f in dict.fromkeys(cases["file"])]),
            pipeline_version=__version__,
        )
        root = history.resolved_root()
        findings = find_regressions(
            root,
            lane=spec.name,
            split=run_columns["split"],
            runtime=run_columns["runtime"],
            metrics=table,
            case_predicates=case_predicates,
            run_id=run_columns["run_id"],
        )
        stored = {"metrics": table, "case_predicates": case_predicates}
        if history.keep_transcripts:
            stored["transcripts"] = transcripts
        for name, rows in stored.items():
            append_run(root, name, rows, lane=spec.name, date=date, run_id=run_columns["run_id"])
        numeric = {m.metric: dg.MetadataValue.float(m.value) for m in values if m.value is not None}
        missing = [m.metric for m in values if m.value is None]
        yield dg.Output(
            table,
            metadata={
                **numeric,
                "missing_metrics": dg.MetadataValue.json(missing),
                "runtime": run_columns["runtime"],
                "history_root": root,
                "dagster/row_count": len(table),
                "trend": dg.MetadataValue.md(lane_chart_markdown(root, spec.name)),
            },
        )
        yield from threshold_check_results(spec.effective_thresholds, values)
        yield regression_check_result(findings)

    return [cases, transcripts, turn_predicates, case_predicates, metrics]


def _runtime_of(transcripts: pd.DataFrame) -> str:
    runtimes = transcripts["runtime"].dropna().unique()
    return str(runtimes[0]) if len(runtimes) else ""
