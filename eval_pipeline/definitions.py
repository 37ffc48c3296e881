"""The code location: every lane under evals/ as an asset group, with its job and nightly schedule."""

from __future__ import annotations

import os

import dagster as dg

from eval_pipeline.dagster_wiring.assets import lane_assets
from eval_pipeline.dagster_wiring.compaction import history_compaction_job, history_compaction_schedule
from eval_pipeline.dagster_wiring.io_manager import ParquetIOManager
from eval_pipeline.dagster_wiring.resources import HistoryResource, RuntimeResource
from eval_pipeline.dagster_wiring.schedules import lane_job, nightly_schedule
from eval_pipeline.lanes.registry import discover_lanes

EXECUTOR_ENV = "EVAL_PIPELINE_EXECUTOR"


def resources() -> dict[str, object]:
    return {
        "runtime": RuntimeResource(),
        "history": HistoryResource(),
        "tables_io_manager": ParquetIOManager(),
    }


def executor() -> dg.ExecutorDefinition:
    """In-process by default: a multiprocess step costs seconds here and the stages are light."""
    if os.environ.get(EXECUTOR_ENV, "in_process") == "multiprocess":
        return dg.multiprocess_executor
    return dg.in_process_executor


def build_definitions() -> dg.Definitions:
    specs = discover_lanes()
    jobs = [lane_job(spec) for spec in specs]
    return dg.Definitions(
        assets=[asset for spec in specs for asset in lane_assets(spec)],
        jobs=[*jobs, history_compaction_job],
        schedules=[
            *(nightly_schedule(spec, job) for spec, job in zip(specs, jobs, strict=True)),
            history_compaction_schedule,
        ],
        resources=resources(),
        executor=executor(),
    )


defs = build_definitions()
