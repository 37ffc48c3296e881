"""Run a lane's job for one series from Python (the CLI's path, and the tests').

It runs the lane's own job (the one the UI and the schedule run) in this process, on a real
instance, so checks, metadata and history are identical whichever way a run was started,
and CLI runs appear in the job's run history with their lane and series tags.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import dagster as dg
import pandas as pd
import pyarrow.parquet as pq

# No public API: rebuilding the code location's job by name in a Celery worker
# (`dg.reconstructable` takes only a module-level job), and pointing definitions built in this
# process at the instance a run uses.
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.storage.defs_state.base import set_defs_state_storage

from eval_pipeline.budget import BudgetReached
from eval_pipeline.dagster_wiring.assets import JOURNAL_METADATA
from eval_pipeline.dagster_wiring.checks import GATE_CHECK, MEASUREMENT_CHECK
from eval_pipeline.dagster_wiring.code_location import REPOSITORY_LABEL, build_definitions
from eval_pipeline.dagster_wiring.dead_runs import fail_dead_runs, mark_live
from eval_pipeline.dagster_wiring.io_manager import PATH_METADATA, ParquetIOManager
from eval_pipeline.dagster_wiring.partitions import (
    custom_case_set,
    partition_key,
    partitions_remembered,
    register_series,
)
from eval_pipeline.dagster_wiring.resources import HistoryResource, PreparedCases, RunRuntime, RuntimeResource
from eval_pipeline.dagster_wiring.runtime_targets import observe_target
from eval_pipeline.dagster_wiring.schedules import job_name, series_tags
from eval_pipeline.dagster_wiring.sqlite_files import prepare_run_file, sqlite_files_kept_open
from eval_pipeline.dagster_wiring.tags import DATE_TAG, HOST_TAG, PID_TAG, SERIES_TAG
from eval_pipeline.failures import FAILING_READS, FirstFailing, failing_cases
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.progress import NoProgress, ProgressObserver
from eval_pipeline.runtimes.base import ChatRuntime
from eval_pipeline.runtimes.targets import RuntimeTarget
from eval_pipeline.samples import FLAKY_READS, flaky_within_run, samples_in
from eval_pipeline.scoring import VerdictWord, verdict_word
from eval_pipeline.series import OfSeries, Series
from eval_pipeline.settings import PROJECT_ROOT, dagster_home
from eval_pipeline.settings import history_root as default_history_root
from eval_pipeline.stage_files import StageFile, faulted
from eval_pipeline.tables import nullable_types

# Runs launched by the UI or the daemon carry their code location in this tag, and the UI
# lists a job's runs by it; an in-process run gets it here so it shows under its lane's job.
REPOSITORY_TAG = ".dagster/repository"
CODE_LOCATION_MODULE = "eval_pipeline.definitions"
CELERY_DEFINITIONS = "celery_definitions"  # the code location with the Celery executor
QUEUE_TAG = "dagster-celery/queue"


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    severity: str
    value: float | None
    threshold: str | None
    verdict: VerdictWord = "n/a"  # the one vocabulary: pass / fail / warn / void / n/a
    description: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)  # the evaluation's metadata values


@dataclass
class LaneOutcome(OfSeries):
    """What one lane partition's run produced, read back from Dagster."""

    series: Series
    run_id: str
    success: bool
    failure: str | None = None
    failure_kind: str | None = None
    checks: list[CheckOutcome] = field(default_factory=list)
    metrics: pd.DataFrame | None = None
    # The run's stage files (transcripts, turn_predicates, case_predicates) that it wrote. A
    # big run's tables are read only as far as a reader needs: the failing rows, the faults.
    files: dict[str, StageFile] = field(default_factory=dict)
    journal_note: str = ""  # what the transcripts step said of its journal ("resumed: 812 of 1,000 …")

    def _table(self, stage: str) -> pd.DataFrame | None:
        stored = self.files.get(stage)
        return stored.read() if stored is not None else None

    @property
    def transcripts(self) -> pd.DataFrame | None:
        """Every turn of the run (read whole: the JSON output and JUnit list them all)."""
        return self._table("transcripts")

    @property
    def turn_predicates(self) -> pd.DataFrame | None:
        return self._table("turn_predicates")

    @property
    def case_predicates(self) -> pd.DataFrame | None:
        return self._table("case_predicates")

    @property
    def turns_driven(self) -> int:
        """Every turn of every sample the run drove (its transcripts' rows, as the usage metric counts)."""
        stored = self.files.get("transcripts")
        return stored.row_count if stored is not None else 0

    def first_failing(self, limit: int) -> FirstFailing | None:
        """The first failing case predicates and their count (None: the stage did not run)."""
        stored = self.files.get("case_predicates")
        if stored is None:
            return None
        return failing_cases(stored.batches(FAILING_READS), self.samples, limit, stored.batch)

    def faulted_turns(self) -> pd.DataFrame | None:
        """The case and fault of every turn that faulted (None: the stage did not run)."""
        stored = self.files.get("transcripts")
        return stored.read(["case_id", "error"], where=faulted()) if stored is not None else None

    @property
    def samples(self) -> int:
        stored = self.files.get("case_predicates")
        return samples_in(stored) if stored is not None else 1

    def flaky(self) -> pd.DataFrame | None:
        """Case predicates whose samples disagree (None: the stage did not run)."""
        stored = self.files.get("case_predicates")
        return flaky_within_run(stored.batches(FLAKY_READS), self.samples) if stored is not None else None

    @property
    def blocking_failures(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed and c.severity == "ERROR" and c.verdict != "void"]

    @property
    def budget_reached(self) -> bool:
        """The run stopped at its budget before every session was sent (its journal keeps the rest)."""
        return self.failure_kind == BudgetReached.__name__

    @property
    def void(self) -> bool:
        """The run did not measure its runtime (too many turns faulted: see scoring.Measurement,
        or its budget stopped it)."""
        return self.budget_reached or any(c.name == MEASUREMENT_CHECK and not c.passed for c in self.checks)

    @property
    def measurement_note(self) -> str:
        if self.budget_reached:  # the message, without the exception's name
            return (self.failure or "").split(f"{BudgetReached.__name__}: ", 1)[-1]
        return next((c.description for c in self.checks if c.name == MEASUREMENT_CHECK), "")


def ensure_instance() -> dg.DagsterInstance:
    """The local Dagster instance at DAGSTER_HOME (created, with the repo's dagster.yaml, if new).

    Creating a SQLite instance migrates its schema; two processes doing that at once on a
    fresh DAGSTER_HOME collide, so creation happens under a file lock. Runs of this host
    whose process died (killed, out of memory) are marked failed here, so they never stay
    unfinished (``dead_runs``).
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
        fail_dead_runs(instance)
    mark_live(home)
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


def _root_cause(error: Any) -> tuple[str, str]:
    """(class name, message) of the innermost cause of a serialized step error."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = str(getattr(error, "message", error)).strip()
    kind = str(getattr(error, "cls_name", ""))
    # Dagster's message starts with the error's qualified class name: the kind says it already.
    return kind, re.sub(rf"^(?:[\w.]+\.)?{re.escape(kind)}: ", "", message) if kind else message


@sqlite_files_kept_open()  # one checkpoint per file and lane run, not one per event
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
    cache: bool | None = None,
    history_root: str = "",
    resume: bool = False,
    max_cost: float | None = None,
    max_turns: int | None = None,
    progress: ProgressObserver | None = None,
    tags: dict[str, str] | None = None,
    log_level: str = "INFO",
    executor: str = "in_process",
    observe: bool = True,
    chat_runtime: ChatRuntime | None = None,
    prepared_cases: StageFile | None = None,
) -> LaneOutcome:
    """Run the lane's job for one series (split or custom case file × runtime target) and read
    the results back. The run is tagged with its lane, series and night.

    ``observe``: a declared target's runtime version is observed first, so the transcripts
    record the version they were measured against; a caller running several lanes of one
    target in one go observes it before the first only.

    ``executor`` ``in_process`` runs every step in this process; ``celery`` runs the code
    location's job (``eval_pipeline.definitions``) with its steps on Celery workers, which
    must serve the lane's runtime target's queue.

    ``resume`` answers the sessions the series' last interrupted run journaled from its journal;
    ``max_cost`` and ``max_turns`` limit what the run sends (:mod:`eval_pipeline.budget`).

    In this process the run takes ``target`` as resolved, and drives ``chat_runtime`` when given
    one (``target``'s, built by the caller, who closes it), else builds its own; likewise its
    cases step takes ``prepared_cases`` (the cases stage file of this series, written by the
    caller; the run moves it into its storage) when given, else writes its own. A run on Celery
    workers takes neither."""
    runtime_config: dict[str, Any] = {
        "spec": "" if target.declared else target.spec,
        "options": {} if target.declared else dict(target.options),
        "concurrency": concurrency,
        "repeat": repeat,
        "seed": seed,
        "resume": resume,
        "max_cost": max_cost,
        "max_turns": max_turns,
        # the shared instance's folder, also for a run on a scratch instance: the journal outlives it
        "journal_dir": str(Path(instance.storage_directory()) / "journal"),
        "cache": cache,
    }
    case_set = custom_case_set(cases_path) if cases_path else split
    series = Series(spec.name, split, target.name, case_set)
    with ExitStack() as scope:
        if executor == "in_process" and is_ad_hoc(target, cases_path):
            # Recorded in history, its stage files where `show` finds them, but not in the
            # shared instance: its launchpad could not run the partition again.
            scratch = scope.enter_context(tempfile.TemporaryDirectory(prefix="eval-pipeline-ad-hoc-"))
            run_on = scope.enter_context(dg.DagsterInstance.ephemeral(tempdir=scratch))
            tables_dir = str(Path(instance.storage_directory()) / "tables")
            register_series(run_on, spec.name, [case_set], [target.name])
        else:
            run_on, tables_dir = instance, ""
            with instance_lock(Path(instance.root_directory)):
                register_series(instance, spec.name, [case_set], [target.name])
            if observe:
                observe_target(instance, target)
        run_config: dict[str, Any] = {
            "ops": {
                f"{spec.name}__cases": {
                    "config": {"cases_path": cases_path, "split": split if cases_path else ""}
                }
            },
            "loggers": {"console": {"config": {"log_level": log_level}}},
        }
        run_tags = {
            **series_tags(series),
            DATE_TAG: date,
            REPOSITORY_TAG: REPOSITORY_LABEL,
            HOST_TAG: socket.gethostname(),
            PID_TAG: str(os.getpid()),
            **({QUEUE_TAG: target.queue} if target.queue else {}),
            **(tags or {}),
        }
        key = partition_key(case_set, target.name)
        # Definitions loaded now read their state from *this* instance, whatever instance an
        # earlier run in this process left as the current one.
        with set_defs_state_storage(run_on.defs_state_storage):
            if executor == "celery":
                # Steps run in worker processes, which load the code location themselves: the
                # resources' settings travel in the run config, and no progress bar reaches them.
                run_config["resources"] = {
                    "runtime": {"config": runtime_config},
                    # resolved here: a worker's environment may name another history
                    "history": {"config": {"root": history_root or default_history_root()}},
                }
                job = ReconstructableRepository.for_module(
                    CODE_LOCATION_MODULE, CELERY_DEFINITIONS, working_directory=str(PROJECT_ROOT)
                ).get_reconstructable_job(job_name(spec))
                partition_tags = job.get_definition().get_tags_for_partition_key(key, None)
                with dg.execute_job(
                    job, run_on, run_config=run_config, tags={**run_tags, **partition_tags}
                ) as result:
                    return _outcome(spec, result, series)
            definitions = build_definitions(
                [spec],
                resources={
                    "runtime": RunRuntime(RuntimeResource(**runtime_config), target, chat_runtime),
                    "history": HistoryResource(root=history_root),
                    "progress": progress or NoProgress(),
                    "prepared_cases": PreparedCases(prepared_cases),
                    "tables_io_manager": ParquetIOManager(base_dir=tables_dir),
                },
                executor_name="in_process",
            )
            run_id = str(uuid.uuid4())
            prepare_run_file(run_on.root_directory, run_id)
            with partitions_remembered(run_on):
                in_process = definitions.resolve_job_def(job_name(spec)).execute_in_process(
                    instance=run_on,
                    partition_key=key,
                    run_config=run_config,
                    raise_on_error=False,
                    run_id=run_id,
                    tags=run_tags,
                )
            return _outcome(spec, in_process, series)


def is_ad_hoc(target: RuntimeTarget, cases_path: str) -> bool:
    """A series the launchpad could not run: its target is not declared in ``evals/runtimes.yaml``
    (its spec lives only in the command line: ``replay:``, ``openai:…``, ``history:``), or its
    cases are a custom file."""
    return not target.declared or bool(cases_path)


def _outcome(spec: LaneSpec, result: dg.ExecuteInProcessResult | Any, series: Series) -> LaneOutcome:
    """A finished run's results, read back from Dagster (its check evaluations and stored tables)."""
    outcome = LaneOutcome(series, result.run_id, result.success)
    outcome.metrics = _stored_value(result, dg.AssetKey([spec.name, "metrics"]))
    journal_note = _materialized_metadata(result, dg.AssetKey([spec.name, "transcripts"]), JOURNAL_METADATA)
    outcome.journal_note = "" if journal_note is None else str(journal_note)
    for stage in ("turn_predicates", "case_predicates", "transcripts"):
        path = _stored_path(result, dg.AssetKey([spec.name, stage]))
        if path is not None:
            outcome.files[stage] = StageFile(path)
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
        # The verdict and bound the check stated (scoring.ThresholdVerdict), never derived again.
        stated = evaluation.metadata.get("verdict")
        bound = evaluation.metadata.get("threshold")
        severity = evaluation.severity.value
        outcome.checks.append(
            CheckOutcome(
                name=evaluation.check_name,
                passed=evaluation.passed,
                severity=severity,
                value=None if value is None or pd.isna(value) else float(value),
                threshold=None if bound is None else str(bound.value),
                verdict=cast(VerdictWord, stated.value)
                if stated is not None
                else verdict_word(evaluation.passed, severity),
                description=evaluation.description or "",
                metadata={name: entry.value for name, entry in evaluation.metadata.items()},
            )
        )
    blocked_only = outcome.metrics is not None and any(
        not c.passed and c.severity == "ERROR" for c in outcome.checks
    )
    failures = result.get_step_failure_events()
    if failures and not blocked_only:
        outcome.failure_kind, outcome.failure = _root_cause(failures[0].step_failure_data.error)
    elif not result.success and not blocked_only:
        # No step failed, yet the run did: the executor lost a step (a Celery worker died).
        outcome.failure_kind, outcome.failure = _run_failure(result.all_events)
    return outcome


@dataclass(frozen=True)
class StoredRunResult:
    """A finished run's events as the instance stored them, read like an execution result (for
    runs this process did not execute: the daemon's)."""

    run_id: str
    success: bool
    all_events: list[dg.DagsterEvent]

    def get_asset_check_evaluations(self) -> list[Any]:
        return [
            event.event_specific_data
            for event in self.all_events
            if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ]

    def get_step_failure_events(self) -> list[dg.DagsterEvent]:
        return [event for event in self.all_events if event.is_step_failure]


def stored_outcome(spec: LaneSpec, instance: dg.DagsterInstance, run: dg.DagsterRun) -> LaneOutcome:
    """The outcome of a lane run the instance holds, read from its stored events (its series
    from its tags), exactly as a run this process executed is read."""
    events = [entry.dagster_event for entry in instance.all_logs(run.run_id) if entry.dagster_event]
    result = StoredRunResult(run.run_id, run.status == dg.DagsterRunStatus.SUCCESS, events)
    return _outcome(spec, result, Series.from_key(run.tags[SERIES_TAG]))


def _run_failure(events: Any) -> tuple[str, str]:
    """(class name, message) of what failed a run outside its steps: the first engine error,
    else the run's failure message."""
    for event in events:
        error = getattr(event.event_specific_data, "error", None)
        if error is not None:
            return _root_cause(error)
    for event in events:
        if event.event_type == dg.DagsterEventType.RUN_FAILURE:
            return "RunFailure", str(event.message)
    return "RunFailure", "the run failed"


def _materialized_metadata(result: dg.ExecuteInProcessResult | Any, key: dg.AssetKey, name: str) -> Any:
    """The value of metadata entry ``name`` of the run's materialization of ``key``, or None."""
    for event in result.all_events:
        if event.is_step_materialization and event.asset_key == key:
            recorded = event.step_materialization_data.materialization.metadata.get(name)
            if recorded is not None:
                return recorded.value
    return None


def _stored_path(result: dg.ExecuteInProcessResult | Any, key: dg.AssetKey) -> Path | None:
    """The Parquet file the run's materialization of ``key`` records (whichever process wrote
    it), or None: the stage did not produce output (an earlier step failed)."""
    recorded = _materialized_metadata(result, key, PATH_METADATA)
    return None if recorded is None else Path(str(recorded))


def _stored_value(result: dg.ExecuteInProcessResult | Any, key: dg.AssetKey) -> pd.DataFrame | None:
    """The stage table the run materialized for ``key``, read whole, or None."""
    path = _stored_path(result, key)
    return pq.read_table(path).to_pandas(types_mapper=nullable_types) if path is not None else None
