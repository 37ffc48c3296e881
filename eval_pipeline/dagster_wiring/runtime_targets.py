"""Runtime targets as an observable source asset, and their concurrency pools.

``runtime_targets`` is one observable source asset partitioned by the same dynamic
partitions as every lane's ``runtime`` dimension: partition ``reference`` *is* the
reference target. Observing it records, per declared target, the digest of its runtime
version (:mod:`eval_pipeline.runtimes.versions`) as the partition's data version. Each lane's
``transcripts`` depends on it through the ``runtime`` dimension, so transcripts of every case
set × target T record T's data version when they are materialized, and Dagster reports them
(and everything downstream) **stale** as soon as an observation finds T behaving differently.

Observation runs on the ``runtime_targets_observe`` schedule (hourly, and just before the
nightly runs) and from the UI ("Observe sources"); before each ``eval-pipeline run`` of a
declared target, once before its first lane, the CLI reports the observation itself, with no
run of its own (so the transcripts record the version they were measured against). Ad-hoc targets (derived names) are not observed: their name already pins
their spec and options.

A target's ``pool_limit`` caps the lane runs that drive it at once, across all lanes: the
transcripts step takes a slot of the Dagster concurrency pool ``runtime-<name>`` (its limit
set from the targets file) before it sends a single turn, and gives it back when done.
Dagster pools are attached to an op, and one lane's transcripts op serves every target, so
the step claims the slot of its partition's pool itself; the instance's pool tables, the
UI's concurrency page and the release of a dead run's slots are Dagster's own.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import dagster as dg

from eval_pipeline.core import targets_file
from eval_pipeline.dagster_wiring.partitions import RUNTIME, RUNTIME_TARGETS, runtime_targets
from eval_pipeline.runtimes import RuntimeSpecError
from eval_pipeline.runtimes.redaction import redacted_spec
from eval_pipeline.runtimes.targets import RuntimeTarget, load_targets
from eval_pipeline.runtimes.versions import runtime_version

RUNTIME_TARGETS_KEY = dg.AssetKey([RUNTIME_TARGETS])
OBSERVE_JOB = "runtime_targets_observe_job"
OBSERVE_SCHEDULE = "runtime_targets_observe"
OBSERVE_CRON = "55 * * * *"  # hourly, and five minutes before the 02:00 nightly runs
POOL_PREFIX = "runtime-"
DATA_VERSION_TAG = "dagster/data_version"  # an observation's data version (no public name for the tag)
POOL_WAIT_LOG_EVERY_S = 30.0


def observed_versions(
    targets: Mapping[str, RuntimeTarget], registered: list[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """(data version by target, problem by target) of the registered, declared targets."""
    versions: dict[str, str] = {}
    problems: dict[str, str] = {}
    for name in registered:
        target = targets.get(name)
        if target is None:
            continue
        try:
            versions[name] = runtime_version(target.spec, target.options).digest
        except RuntimeSpecError as exc:
            problems[name] = str(exc)
    return versions, problems


@contextmanager
def beta_apis() -> Iterator[None]:
    """Dagster's observable source assets, partitioned data versions and multi-to-single
    partition mappings are marked beta; they are chosen knowingly (pinned dagster), so their
    warnings are not repeated on every command's stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        yield


def _observe_runtime_targets(context: dg.AssetExecutionContext) -> dg.DataVersionsByPartition:
    targets = load_targets(targets_file())
    # A run for one partition observes that target (a CLI run, before it drives it); a run
    # without one (the schedule, "Observe sources" in the UI) observes every registered target.
    registered = (
        [context.partition_key]
        if context.has_partition_key
        else context.instance.get_dynamic_partitions(RUNTIME_TARGETS)
    )
    versions, problems = observed_versions(targets, registered)
    for name, version in versions.items():
        context.log.info(f"{name} ({redacted_spec(targets[name].spec)}): runtime version {version}")
    for name, problem in problems.items():
        # Not observed (its previous version stands): an unreachable server is not a new runtime.
        context.log.warning(f"{name}: runtime version unknown, not observed: {problem}")
    with beta_apis():
        return dg.DataVersionsByPartition(versions)


with beta_apis():
    runtime_targets_asset = dg.observable_source_asset(
        key=RUNTIME_TARGETS_KEY,
        partitions_def=runtime_targets,
        group_name="runtimes",
        description="The runtime targets of evals/runtimes.yaml, one partition each. Its data version is "
        "what identifies the runtime's behaviour (model the server reports, pack or file hashes); when it "
        "changes, every lane's transcripts of that target are stale.",
    )(_observe_runtime_targets)


def transcripts_runtime_dep() -> dg.AssetDep:
    """The dependency of a lane's transcripts on its partition's runtime target."""
    with beta_apis():
        mapping = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=RUNTIME)
    return dg.AssetDep(RUNTIME_TARGETS_KEY, partition_mapping=mapping)


observe_job = dg.define_asset_job(
    name=OBSERVE_JOB,
    selection=dg.AssetSelection.assets(RUNTIME_TARGETS_KEY),
    description="Observe every declared runtime target's version.",
)


@dg.schedule(
    name=OBSERVE_SCHEDULE,
    cron_schedule=OBSERVE_CRON,
    execution_timezone="UTC",
    job=observe_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Hourly: observe every declared runtime target, so a changed runtime shows as stale.",
)
def observe_schedule(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
    names = sorted(load_targets(targets_file()))
    missing = [n for n in names if not context.instance.has_dynamic_partition(RUNTIME_TARGETS, n)]
    if missing:
        context.instance.add_dynamic_partitions(RUNTIME_TARGETS, missing)
    # No partition key: the run observes every registered target at once.
    yield dg.RunRequest(run_key=context.scheduled_execution_time.strftime("%Y-%m-%dT%H:%M"))


def observe_target(instance: dg.DagsterInstance, target: RuntimeTarget) -> bool:
    """Observe one declared target's runtime version now (its partition of ``runtime_targets``).

    The observation is reported to the instance directly, as the observe job's would be (the
    partition's data version), without a run of its own: a CLI invocation adds its lane runs
    to the Runs page and nothing else. False: not declared, or its version cannot be told now
    (the previous observation stands)."""
    if not target.declared:
        return False
    versions, _ = observed_versions({target.name: target}, [target.name])
    if target.name not in versions:
        return False
    instance.report_runless_asset_event(
        dg.AssetObservation(
            asset_key=RUNTIME_TARGETS_KEY,
            partition=target.name,
            tags={DATA_VERSION_TAG: versions[target.name]},
        )
    )
    return True


def pool_name(target: str) -> str:
    return f"{POOL_PREFIX}{target}"


@contextmanager
def runtime_pool_slot(
    instance: dg.DagsterInstance,
    run: dg.DagsterRun,
    step_key: str,
    target: RuntimeTarget,
    log: dg.DagsterLogManager,
) -> Iterator[str | None]:
    """Hold a slot of the target's pool while the body runs (nothing when it has no ``pool_limit``).

    The pool's limit is set from the targets file each time, so the file stays the one place it
    is declared. A step waiting for a slot shows as pending in the pool.
    """
    storage = instance.event_log_storage
    if target.pool_limit is None or not storage.supports_global_concurrency_limits:
        yield None
        return
    pool = pool_name(target.name)
    if storage.get_concurrency_info(pool).slot_count != target.pool_limit:
        storage.set_concurrency_slots(pool, target.pool_limit)
    waited_since = time.monotonic()
    logged_at = -POOL_WAIT_LOG_EVERY_S
    try:
        while True:
            claim = storage.claim_concurrency_slot(pool, run.run_id, step_key)
            if claim.is_claimed:
                break
            waited = time.monotonic() - waited_since
            if waited - logged_at >= POOL_WAIT_LOG_EVERY_S:
                log.info(
                    f"waiting for a slot of pool {pool} (limit {target.pool_limit}, {waited:.0f} s so far)"
                )
                logged_at = waited
            time.sleep(min(max(claim.sleep_interval or 0.5, 0.2), 2.0))
        log.info(f"holding a slot of pool {pool} (limit {target.pool_limit})")
        yield pool
    finally:
        storage.free_concurrency_slot_for_step(run.run_id, step_key)
