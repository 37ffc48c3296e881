"""Materialize a lane partition through Dagster from Python (the CLI's path, and the tests').

It runs the very asset definitions the UI and the schedule run, on a real instance, so
checks, metadata and history are identical whichever way a run was started.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pandas as pd

from eval_pipeline.dagster_wiring.assets import lane_assets
from eval_pipeline.dagster_wiring.io_manager import ParquetIOManager
from eval_pipeline.dagster_wiring.partitions import partition_key
from eval_pipeline.dagster_wiring.resources import HistoryResource, RuntimeResource
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.settings import PROJECT_ROOT, dagster_home


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    severity: str
    value: float | None
    threshold: str | None


@dataclass
class LaneOutcome:
    """What one lane partition's run produced, read back from Dagster."""

    lane: str
    split: str
    run_id: str
    runtime: str
    success: bool
    failure: str | None = None
    failure_kind: str | None = None
    checks: list[CheckOutcome] = field(default_factory=list)
    metrics: pd.DataFrame | None = None
    turn_predicates: pd.DataFrame | None = None
    case_predicates: pd.DataFrame | None = None

    @property
    def blocking_failures(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed and c.severity == "ERROR"]


def ensure_instance() -> dg.DagsterInstance:
    """The local Dagster instance at DAGSTER_HOME (created, with the repo's dagster.yaml, if new)."""
    home = dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    template = PROJECT_ROOT / "dagster.yaml"
    if not config.exists() and template.exists():
        shutil.copyfile(template, config)
    os.environ["DAGSTER_HOME"] = str(home)
    return dg.DagsterInstance.get()


def _root_cause(error: Any) -> tuple[str, str]:
    """(class name, message) of the innermost cause of a serialized step error."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = str(getattr(error, "message", error)).strip()
    return str(getattr(error, "cls_name", "")), message


def materialize_lane(
    spec: LaneSpec,
    split: str,
    *,
    date: str,
    instance: dg.DagsterInstance,
    runtime_spec: str = "",
    runtime_options: dict[str, Any] | None = None,
    concurrency: int | None = None,
    cases_path: str = "",
    history_root: str = "",
    tags: dict[str, str] | None = None,
    log_level: str = "INFO",
) -> LaneOutcome:
    """Materialize every stage of one lane for (date, split) and read the results back."""
    assets = lane_assets(spec)
    resources = {
        "runtime": RuntimeResource(
            spec=runtime_spec,
            options_json=json.dumps(runtime_options) if runtime_options else "",
            concurrency=concurrency,
        ),
        "history": HistoryResource(root=history_root),
        "tables_io_manager": ParquetIOManager(),
    }
    run_config = {
        "ops": {f"{spec.name}__cases": {"config": {"cases_path": cases_path}}},
        "loggers": {"console": {"config": {"log_level": log_level}}},
    }
    result = dg.materialize(
        assets,
        instance=instance,
        resources=resources,
        partition_key=partition_key(date, split),
        run_config=run_config,
        raise_on_error=False,
        tags=tags or {},
    )
    outcome = LaneOutcome(
        lane=spec.name,
        split=split,
        run_id=result.run_id,
        runtime=resources["runtime"].resolved_spec(),  # type: ignore[attr-defined]
        success=result.success,
    )
    checks_by_name = {t.check_name: t for t in spec.effective_thresholds}
    metric_key = dg.AssetKey([spec.name, "metrics"])
    stored = {
        stage: _stored_value(result, dg.AssetKey([spec.name, stage]))
        for stage in ("metrics", "turn_predicates", "case_predicates")
    }
    outcome.metrics, outcome.turn_predicates, outcome.case_predicates = (
        stored["metrics"],
        stored["turn_predicates"],
        stored["case_predicates"],
    )
    values = (
        {}
        if outcome.metrics is None
        else dict(zip(outcome.metrics["metric"], outcome.metrics["value"], strict=True))
    )
    if outcome.metrics is not None and len(outcome.metrics):
        outcome.runtime = str(outcome.metrics["runtime"].iloc[0])
    for evaluation in result.get_asset_check_evaluations():
        if evaluation.asset_key != metric_key:
            continue
        threshold = checks_by_name.get(evaluation.check_name)
        value = values.get(evaluation.check_name)
        outcome.checks.append(
            CheckOutcome(
                name=evaluation.check_name,
                passed=evaluation.passed,
                severity=evaluation.severity.value,
                value=None if value is None or pd.isna(value) else float(value),
                threshold=f"{threshold.op} {threshold.value:g}" if threshold else None,
            )
        )
    blocked_only = outcome.metrics is not None and bool(outcome.blocking_failures)
    failures = result.get_step_failure_events()
    if failures and not blocked_only:
        outcome.failure_kind, outcome.failure = _root_cause(failures[0].step_failure_data.error)
    return outcome


def _stored_value(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> pd.DataFrame | None:
    try:
        value = result.asset_value(key)
    except Exception:  # the stage did not produce output (an earlier step failed)
        return None
    return value if isinstance(value, pd.DataFrame) else None
