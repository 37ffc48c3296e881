"""Assemble the Dagster definitions of a set of lanes (the code location, and the CLI's runs)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import dagster as dg

from eval_pipeline.dagster_wiring.assets import lane_assets
from eval_pipeline.dagster_wiring.compaction import history_compaction_job, history_compaction_schedule
from eval_pipeline.dagster_wiring.io_manager import ParquetIOManager
from eval_pipeline.dagster_wiring.resources import HistoryResource, PreparedCases, RuntimeResource
from eval_pipeline.dagster_wiring.runtime_targets import observe_job, observe_schedule, runtime_targets_asset
from eval_pipeline.dagster_wiring.schedules import lane_job, nightly_schedule
from eval_pipeline.dagster_wiring.sensors import notify_sensor, series_keys_sensor
from eval_pipeline.lanes import LaneSpec, discover_lanes
from eval_pipeline.run import NoProgress

EXECUTOR_ENV = "EVAL_PIPELINE_EXECUTOR"
# The code location's name in workspace.yaml and [tool.dagster]; one Definitions object is
# served as Dagster's single repository, "__repository__".
CODE_LOCATION = "eval_pipeline"
REPOSITORY_LABEL = f"__repository__@{CODE_LOCATION}"


def default_resources() -> dict[str, object]:
    return {
        "runtime": RuntimeResource(),
        "history": HistoryResource(),
        "tables_io_manager": ParquetIOManager(),
        "progress": NoProgress(),
        "prepared_cases": PreparedCases(),
    }


EXECUTORS = ("in_process", "multiprocess", "celery")


def executor_name() -> str:
    """``EVAL_PIPELINE_EXECUTOR``: in_process (default), multiprocess or celery."""
    name = os.environ.get(EXECUTOR_ENV) or "in_process"
    if name not in EXECUTORS:
        raise ValueError(f"{EXECUTOR_ENV}={name!r}: expected one of {', '.join(EXECUTORS)}")
    return name


def executor(name: str | None = None) -> dg.ExecutorDefinition:
    """In-process by default: a multiprocess step costs seconds here and the stages are light.
    ``celery`` runs steps on Celery workers (the ``scale`` extra; see ``celery.py``)."""
    name = name or executor_name()
    if name == "celery":
        from eval_pipeline.dagster_wiring.celery import celery_executor

        return celery_executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    return dg.in_process_executor


def build_definitions(
    specs: Sequence[LaneSpec] | None = None,
    resources: Mapping[str, object] | None = None,
    executor_name: str | None = None,
) -> dg.Definitions:
    """Every lane's asset group, job and nightly schedule, the runtime targets (an observable
    source asset, hourly observed), plus history compaction. The executor is
    ``executor_name``, else ``EVAL_PIPELINE_EXECUTOR``."""
    specs = list(discover_lanes() if specs is None else specs)
    jobs = [lane_job(spec) for spec in specs]
    return dg.Definitions(
        assets=[runtime_targets_asset, *(asset for spec in specs for asset in lane_assets(spec))],
        jobs=[*jobs, observe_job, history_compaction_job],
        schedules=[
            *(nightly_schedule(spec, job) for spec, job in zip(specs, jobs, strict=True)),
            observe_schedule,
            history_compaction_schedule,
        ],
        sensors=[series_keys_sensor(specs), notify_sensor(specs)],
        resources={**default_resources(), **(resources or {})},
        executor=executor(executor_name),
    )
