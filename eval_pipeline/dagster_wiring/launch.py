"""Run a lane's job for one series from Python (the CLI's path, and the tests').

It runs the lane's own job (the one the UI and the schedule run) in this process, on a real
instance, so checks, metadata and history are identical whichever way a run was started,
and CLI runs appear in the job's run history with their lane and series tags.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import dagster as dg
import pandas as pd

from eval_pipeline.dagster_wiring.assets import DATE_TAG
from eval_pipeline.dagster_wiring.checks import GATE_CHECK, MEASUREMENT_CHECK
from eval_pipeline.dagster_wiring.code_location import REPOSITORY_LABEL, build_definitions
from eval_pipeline.dagster_wiring.partitions import custom_case_set, partition_key, register_series
from eval_pipeline.dagster_wiring.resources import HistoryResource, RuntimeResource
from eval_pipeline.dagster_wiring.runtime_targets import observe_target
from eval_pipeline.dagster_wiring.schedules import job_name, series_tags
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.progress import NoProgress, ProgressObserver
from eval_pipeline.runtimes.targets import RuntimeTarget
from eval_pipeline.scoring import VerdictWord, verdict_word
from eval_pipeline.settings import PROJECT_ROOT, dagster_home

# Runs launched by the UI or the daemon carry their code location in this tag, and the UI
# lists a job's runs by it; an in-process run gets it here so it shows under its lane's job.
REPOSITORY_TAG = ".dagster/repository"
HOST_TAG = "eval_pipeline/host"
PID_TAG = "eval_pipeline/pid"  # the process running an in-process (CLI) run: dead → the run failed


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    severity: str
    value: float | None
    threshold: str | None
    verdict: VerdictWord = "n/a"  # the one vocabulary: pass / fail / warn / void / n/a
    description: str = ""


@dataclass
class LaneOutcome:
    """What one lane partition's run produced, read back from Dagster."""

    lane: str
    split: str
    case_set: str
    run_id: str
    runtime: str
    success: bool
    failure: str | None = None
    failure_kind: str | None = None
    checks: list[CheckOutcome] = field(default_factory=list)
    metrics: pd.DataFrame | None = None
    turn_predicates: pd.DataFrame | None = None
    case_predicates: pd.DataFrame | None = None
    transcripts: pd.DataFrame | None = None

    @property
    def blocking_failures(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed and c.severity == "ERROR" and c.verdict != "void"]

    @property
    def void(self) -> bool:
        """The run did not measure its runtime (too many turns faulted): see scoring.Measurement."""
        return any(c.name == MEASUREMENT_CHECK and not c.passed for c in self.checks)

    @property
    def measurement_note(self) -> str:
        return next((c.description for c in self.checks if c.name == MEASUREMENT_CHECK), "")


def ensure_instance() -> dg.DagsterInstance:
    """The local Dagster instance at DAGSTER_HOME (created, with the repo's dagster.yaml, if new).

    Creating a SQLite instance migrates its schema; two processes doing that at once on a
    fresh DAGSTER_HOME collide, so creation happens under a file lock. Runs of this host
    whose process died (killed, out of memory) are marked failed here, so they never stay
    STARTED.
    """
    home = dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    with instance_lock(home):
        config = home / "dagster.yaml"
        template = PROJECT_ROOT / "dagster.yaml"
        if not config.exists() and template.exists():
            shutil.copyfile(template, config)
        instance = dg.DagsterInstance.get()
        instance.get_runs(limit=1)  # touch every storage while we hold the lock
        fail_orphaned_runs(instance)
    return instance


@contextmanager
def instance_lock(home: Path) -> Iterator[None]:
    """An exclusive lock on the instance folder, for the few calls that must not overlap."""
    with open(home / ".eval_pipeline.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fail_orphaned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark STARTED runs launched from this host by a process that no longer exists as FAILED."""
    host = socket.gethostname()
    failed = []
    for run in instance.get_runs(
        dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED], tags={HOST_TAG: host})
    ):
        pid = run.tags.get(PID_TAG, "")
        if pid.isdigit() and not _alive(int(pid)):
            instance.report_run_failed(run, f"the process that ran it (pid {pid} on {host}) is gone")
            failed.append(run.run_id)
    return failed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _root_cause(error: Any) -> tuple[str, str]:
    """(class name, message) of the innermost cause of a serialized step error."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = str(getattr(error, "message", error)).strip()
    return str(getattr(error, "cls_name", "")), message


def materialize_lane(
    spec: LaneSpec,
    target: RuntimeTarget,
    *,
    instance: dg.DagsterInstance,
    split: str,
    date: str,
    cases_path: str = "",
    concurrency: int | None = None,
    repeat: int | None = None,
    seed: int | None = None,
    history_root: str = "",
    progress: ProgressObserver | None = None,
    tags: dict[str, str] | None = None,
    log_level: str = "INFO",
) -> LaneOutcome:
    """Run the lane's job for one series (split or custom case file × runtime target) and read
    the results back. The run is tagged with its lane, series and night."""
    case_set = custom_case_set(cases_path) if cases_path else split
    with instance_lock(Path(instance.root_directory)):
        register_series(instance, spec.name, [case_set], [target.name])
    observe_target(instance, target, {HOST_TAG: socket.gethostname(), **(tags or {})})
    runtime = RuntimeResource(
        spec="" if target.declared else target.spec,
        options={} if target.declared else dict(target.options),
        concurrency=concurrency,
        repeat=repeat,
        seed=seed,
    )
    definitions = build_definitions(
        [spec],
        resources={
            "runtime": runtime,
            "history": HistoryResource(root=history_root),
            "progress": progress or NoProgress(),
        },
    )
    run_config = {
        "ops": {
            f"{spec.name}__cases": {
                "config": {"cases_path": cases_path, "split": split if cases_path else ""}
            }
        },
        "loggers": {"console": {"config": {"log_level": log_level}}},
    }
    result = definitions.resolve_job_def(job_name(spec)).execute_in_process(
        instance=instance,
        partition_key=partition_key(case_set, target.name),
        run_config=run_config,
        raise_on_error=False,
        tags={
            **series_tags(spec.name, split, target.name, case_set),
            DATE_TAG: date,
            REPOSITORY_TAG: REPOSITORY_LABEL,
            HOST_TAG: socket.gethostname(),
            PID_TAG: str(os.getpid()),
            **(tags or {}),
        },
    )
    outcome = LaneOutcome(
        lane=spec.name,
        split=split,
        case_set=case_set,
        run_id=result.run_id,
        runtime=target.name,
        success=result.success,
    )
    stored = {
        stage: _stored_value(result, dg.AssetKey([spec.name, stage]))
        for stage in ("metrics", "turn_predicates", "case_predicates", "transcripts")
    }
    outcome.metrics, outcome.turn_predicates, outcome.case_predicates, outcome.transcripts = (
        stored["metrics"],
        stored["turn_predicates"],
        stored["case_predicates"],
        stored["transcripts"],
    )
    bounds = {t.check_name: f"{t.op} {t.value:g}" for t in spec.effective_thresholds}
    values = (
        {}
        if outcome.metrics is None
        else dict(zip(outcome.metrics["metric"], outcome.metrics["value"], strict=True))
    )
    lane_keys = {dg.AssetKey([spec.name, "metrics"]), dg.AssetKey([spec.name, "history"])}
    for evaluation in result.get_asset_check_evaluations():
        if evaluation.asset_key not in lane_keys or evaluation.check_name == GATE_CHECK:
            continue  # the gate restates the ERROR thresholds' verdicts, listed one by one
        value = values.get(evaluation.check_name)
        stated = evaluation.metadata.get("verdict")
        severity = evaluation.severity.value
        outcome.checks.append(
            CheckOutcome(
                name=evaluation.check_name,
                passed=evaluation.passed,
                severity=severity,
                value=None if value is None or pd.isna(value) else float(value),
                threshold=bounds.get(evaluation.check_name),
                verdict=cast(VerdictWord, stated.value)
                if stated is not None
                else verdict_word(evaluation.passed, severity),
                description=evaluation.description or "",
            )
        )
    blocked_only = outcome.metrics is not None and any(
        not c.passed and c.severity == "ERROR" for c in outcome.checks
    )
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
