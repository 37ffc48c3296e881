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
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import dagster as dg

# No public API: rebuilding the code location's job by name in a Celery worker
# (`dg.reconstructable` takes only a module-level job), and pointing definitions built in this
# process at the instance a run uses.
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.storage.defs_state.base import set_defs_state_storage

from eval_pipeline.core import Series, dagster_home, instance_template
from eval_pipeline.dagster_wiring.code_location import REPOSITORY_LABEL, build_definitions
from eval_pipeline.dagster_wiring.dead_runs import fail_dead_runs, mark_live
from eval_pipeline.dagster_wiring.io_manager import ParquetIOManager
from eval_pipeline.dagster_wiring.outcomes import LaneOutcome, read_outcome
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
from eval_pipeline.dagster_wiring.tags import DATE_TAG, HOST_TAG, PID_TAG
from eval_pipeline.lanes import LaneSpec
from eval_pipeline.run import LaneRunRequest, NoProgress, ProgressObserver
from eval_pipeline.runtimes import ChatRuntime, RuntimeSpecError
from eval_pipeline.runtimes.redaction import redacted_spec
from eval_pipeline.runtimes.targets import RuntimeTarget
from eval_pipeline.tables import StageFile

# Runs launched by the UI or the daemon carry their code location in this tag, and the UI
# lists a job's runs by it; an in-process run gets it here so it shows under its lane's job.
REPOSITORY_TAG = ".dagster/repository"
CODE_LOCATION_MODULE = "eval_pipeline.definitions"
CELERY_DEFINITIONS = "celery_definitions"  # the code location with the Celery executor
QUEUE_TAG = "dagster-celery/queue"


def ensure_instance() -> dg.DagsterInstance:
    """The local Dagster instance at DAGSTER_HOME (created, with the project's dagster.yaml, if new).

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
        if not config.exists():
            shutil.copyfile(instance_template(), config)
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


@sqlite_files_kept_open()  # one checkpoint per file and lane run, not one per event
def materialize_lane(
    spec: LaneSpec,
    target: RuntimeTarget,
    request: LaneRunRequest,
    *,
    instance: dg.DagsterInstance,
    progress: ProgressObserver | None = None,
    observe: bool = True,
    chat_runtime: ChatRuntime | None = None,
    prepared_cases: StageFile | None = None,
) -> LaneOutcome:
    """Run the lane's job for one series (``request``'s split or custom case file × runtime
    target) and read the results back. The run is tagged with its lane, series and night.

    ``observe``: a declared target's runtime version is observed first, so the transcripts
    record the version they were measured against; a caller running several lanes of one
    target in one go observes it before the first only.

    The request's ``executor`` ``in_process`` runs every step in this process; ``celery`` runs
    the code location's job (``eval_pipeline.definitions``) with its steps on Celery workers,
    which must serve the lane's runtime target's queue.

    In this process the run takes ``target`` as resolved, and drives ``chat_runtime`` when given
    one (``target``'s, built by the caller, who closes it), else builds its own; likewise its
    cases step takes ``prepared_cases`` (the cases stage file of this series, written by the
    caller; the run moves it into its storage) when given, else writes its own. A run on Celery
    workers takes neither."""
    split, cases_path, executor = request.split, request.cases_path, request.executor
    # the shared instance's folder, also for a run on a scratch instance: the journal outlives it
    journal_dir = str(Path(instance.storage_directory()) / "journal")
    runtime_config = RuntimeResource.config_of(target, request.drive, journal_dir)
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
        run_config = _run_config(spec.name, request)
        run_tags = _run_tags(series, target, request)
        key = partition_key(case_set, target.name)
        # Definitions loaded now read their state from *this* instance, whatever instance an
        # earlier run in this process left as the current one.
        with set_defs_state_storage(run_on.defs_state_storage):
            if executor == "celery":
                # Steps run in worker processes, which load the code location themselves: the
                # resources' settings travel in the run config, and no progress bar reaches them.
                check_celery_spec(target)
                run_config["resources"] = {
                    "runtime": {"config": runtime_config},
                    # resolved here: a worker's environment may name another history
                    "history": {"config": {"root": request.history_root}},
                }
                # Workers build it from the project they find (their folder, EVAL_PIPELINE_PROJECT).
                job = ReconstructableRepository.for_module(
                    CODE_LOCATION_MODULE, CELERY_DEFINITIONS
                ).get_reconstructable_job(job_name(spec))
                partition_tags = job.get_definition().get_tags_for_partition_key(key, None)
                with dg.execute_job(
                    job, run_on, run_config=run_config, tags={**run_tags, **partition_tags}
                ) as result:
                    return read_outcome(spec, result, series)
            resources = {
                "runtime": RunRuntime(RuntimeResource(**runtime_config), target, chat_runtime),
                "history": HistoryResource(root=request.history_root),
                "progress": progress or NoProgress(),
                "prepared_cases": PreparedCases(prepared_cases),
                "tables_io_manager": ParquetIOManager(base_dir=tables_dir),
            }
            in_process = _execute_in_process(spec, run_on, resources, key, run_config, run_tags)
            return read_outcome(spec, in_process, series)


def _execute_in_process(
    spec: LaneSpec,
    instance: dg.DagsterInstance,
    resources: dict[str, Any],
    partition: str,
    run_config: dict[str, Any],
    tags: dict[str, str],
) -> dg.ExecuteInProcessResult:
    """The lane's job, run in this process on ``instance`` for one partition, with ``resources``
    (a run that fails is a result, not an exception)."""
    definitions = build_definitions([spec], resources=resources, executor_name="in_process")
    run_id = str(uuid.uuid4())
    prepare_run_file(instance.root_directory, run_id)
    with partitions_remembered(instance):
        return definitions.resolve_job_def(job_name(spec)).execute_in_process(
            instance=instance,
            partition_key=partition,
            run_config=run_config,
            raise_on_error=False,
            run_id=run_id,
            tags=tags,
        )


def _run_config(lane: str, request: LaneRunRequest) -> dict[str, Any]:
    """The run config of a lane run: its cases step's custom case file (and the split whose rules
    it runs under), and the console log level."""
    cases_path = request.cases_path
    return {
        "ops": {
            f"{lane}__cases": {
                "config": {"cases_path": cases_path, "split": request.split if cases_path else ""}
            }
        },
        "loggers": {"console": {"config": {"log_level": request.log_level}}},
    }


def _run_tags(series: Series, target: RuntimeTarget, request: LaneRunRequest) -> dict[str, str]:
    """A lane run's tags: its series and night, the code location the UI lists it under, the host
    and process that run it (dead runs are told by them), its Celery queue, and the caller's."""
    return {
        **series_tags(series),
        DATE_TAG: request.date,
        REPOSITORY_TAG: REPOSITORY_LABEL,
        HOST_TAG: socket.gethostname(),
        PID_TAG: str(os.getpid()),
        **({QUEUE_TAG: target.queue} if target.queue else {}),
        **request.tags,
    }


def check_celery_spec(target: RuntimeTarget) -> None:
    """A Celery run's runtime spec travels in its run config, which the instance stores: an
    ad-hoc spec holding a secret (credentials in its URL) is refused (RuntimeSpecError)."""
    if not target.declared and redacted_spec(target.spec) != target.spec:
        raise RuntimeSpecError(
            f"runtime {redacted_spec(target.spec)}: a Celery run stores its runtime spec in the "
            "instance, so a spec holding a secret cannot run on workers; declare the target in "
            "runtimes.yaml with the secret in an environment variable (options: {api_key_env: NAME}), "
            "or run it in process"
        )


def is_ad_hoc(target: RuntimeTarget, cases_path: str) -> bool:
    """A series the launchpad could not run: its target is not declared in ``evals/runtimes.yaml``
    (its spec lives only in the command line: ``replay:``, ``openai:…``, ``history:``), or its
    cases are a custom file."""
    return not target.declared or bool(cases_path)
