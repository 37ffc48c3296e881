"""Dagster as thin wiring: the code location's assets, checks, partitions,
resources, schedules and sensors, and launching a lane run in this process (launch).

What other rooms use is exported here and loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.core.faces import lazy_exports

if TYPE_CHECKING:
    from eval_pipeline.dagster_wiring.code_location import build_definitions
    from eval_pipeline.dagster_wiring.dead_runs import fail_dead_runs_of_existing_instance
    from eval_pipeline.dagster_wiring.launch import ensure_instance
    from eval_pipeline.dagster_wiring.stored_runs import StoredRun

_EXPORTS: dict[str, str] = {
    "StoredRun": "stored_runs",
    "build_definitions": "code_location",
    "ensure_instance": "launch",
    "fail_dead_runs_of_existing_instance": "dead_runs",
}
__all__ = ["StoredRun", "build_definitions", "ensure_instance", "fail_dead_runs_of_existing_instance"]

__getattr__ = lazy_exports(__name__, _EXPORTS)
