"""The code location's sensors.

``register_series_keys`` keeps each lane's partition keys in step with what is declared: its
splits and the runtime targets in ``evals/runtimes.yaml``, so the launchpad offers every
declared series before anything has run, and nothing else: a key nothing declares (a target
since removed, or the ad-hoc keys an older version registered for ``--cases`` and
command-line runtimes) is deleted, since a run of it could not be launched.

``notify_lane_runs`` sends the notifications of the lane runs the daemon finished (see
:mod:`eval_pipeline.notify`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import dagster as dg

from eval_pipeline.cases import CaseFileError
from eval_pipeline.core import Series, targets_file
from eval_pipeline.dagster_wiring.assets import METRICS_FRESHNESS
from eval_pipeline.dagster_wiring.partitions import RUNTIME_TARGETS, case_sets_name
from eval_pipeline.dagster_wiring.resources import HistoryResource
from eval_pipeline.dagster_wiring.tags import DATE_TAG, HIDDEN_TAG_PREFIX, LANE_TAG, SERIES_TAG
from eval_pipeline.lanes import LaneSpec
from eval_pipeline.notify import configured, dispatch, instance_ledger, notify_file, notify_lane_runs
from eval_pipeline.notify.outcomes import lane_run
from eval_pipeline.notify.staleness import stale_series_events
from eval_pipeline.runtimes.targets import load_targets

SENSOR_NAME = "register_series_keys"


def series_keys_sensor(specs: Sequence[LaneSpec]) -> dg.SensorDefinition:
    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Registers every lane split and declared runtime target as partition keys, and "
        "deletes the keys nothing declares.",
    )
    def _register(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        wanted = {case_sets_name(s.name): sorted(s.splits) for s in specs}
        wanted[RUNTIME_TARGETS] = sorted(load_targets(targets_file()))
        requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
        for name, keys in wanted.items():
            registered = context.instance.get_dynamic_partitions(name)
            missing = [k for k in keys if k not in registered]
            undeclared = [k for k in registered if k not in keys]
            if missing:
                requests.append(
                    dg.AddDynamicPartitionsRequest(partitions_def_name=name, partition_keys=missing)
                )
            if undeclared:
                requests.append(
                    dg.DeleteDynamicPartitionsRequest(partitions_def_name=name, partition_keys=undeclared)
                )
        if not requests:
            return dg.SkipReason("the registered splits and runtime targets are the declared ones")
        return dg.SensorResult(dynamic_partitions_requests=requests)

    return _register


NOTIFY_SENSOR_NAME = "notify_lane_runs"
CLI_SOURCE_TAG = f"{HIDDEN_TAG_PREFIX}source"  # "cli": that run's notifications are `run --notify`'s
NOTIFY_LOOKBACK = timedelta(days=1)  # the first tick's reach: no storm of every run ever stored
RUNS_PER_TICK = 100


def notify_sensor(specs: Sequence[LaneSpec]) -> dg.SensorDefinition:
    """Sends the events of every lane run the daemon (a schedule, the UI) finished, and a
    ``stale`` event for each nightly series whose last run is older than the lanes' freshness
    window, to the channels of ``evals/notify.yaml``, through the code ``run --notify`` uses; the ledger in
    the instance's storage keeps it to one message per series, event and night."""
    by_name = {spec.name: spec for spec in specs}

    @dg.sensor(
        name=NOTIFY_SENSOR_NAME,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Sends each finished lane run's events (check failed, regression, void, recovered) "
        "and each stale nightly series to the channels of evals/notify.yaml, once per series, event "
        "and night.",
    )
    def _notify(context: dg.SensorEvaluationContext, history: HistoryResource) -> dg.SkipReason:
        # launch assembles the definitions this module is part of: imported at tick time
        from eval_pipeline.dagster_wiring.outcomes import stored_outcome

        try:
            config = configured()
        except CaseFileError as exc:
            for problem in exc.problems:
                context.log.error(str(problem))
            return dg.SkipReason(
                f"{notify_file()} is not valid: {len(exc.problems)} problem(s), nothing sent"
            )
        if config is None:
            return dg.SkipReason(f"no {notify_file()}: no channels to notify")
        after = (
            datetime.fromtimestamp(float(context.cursor), UTC)
            if context.cursor
            else datetime.now(UTC) - NOTIFY_LOOKBACK
        )
        records = context.instance.get_run_records(
            dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS], updated_after=after),
            limit=RUNS_PER_TICK,
            order_by="update_timestamp",
            ascending=True,
        )
        runs = []
        for record in records:
            run = record.dagster_run
            spec = by_name.get(run.tags.get(LANE_TAG, ""))
            if spec is None or run.tags.get(CLI_SOURCE_TAG) == "cli" or SERIES_TAG not in run.tags:
                continue
            night = run.tags.get(DATE_TAG) or record.create_timestamp.strftime("%Y-%m-%d")
            runs.append(lane_run(stored_outcome(spec, context.instance, run), night))
        if records:
            context.update_cursor(str(max(r.update_timestamp for r in records).timestamp()))
        ledger = instance_ledger(context.instance.storage_directory())
        done = notify_lane_runs(runs, config, ledger, history_root=history.resolved_root())
        nightly = [t.name for t in load_targets(targets_file()).values() if t.nightly]
        nightly_series = {
            Series(s.name, split, target, split)
            for s in specs
            for split in s.nightly_splits
            for target in nightly
        }
        stale = stale_series_events(
            history.resolved_root(),
            nightly_series,
            now=datetime.now(UTC),
            window=METRICS_FRESHNESS.fail_window.to_timedelta(),
        )
        done.add(dispatch(stale, config, ledger))
        for warning in done.warnings:
            context.log.warning(f"notification {warning}")
        for channel, kind, series in done.sent:
            context.log.info(f"sent {kind} for {series} to channel {channel!r}")
        return dg.SkipReason(
            f"{len(runs)} lane run(s) read; {len(done.sent)} message(s) sent, {done.duplicates} already sent, "
            f"{len(done.warnings)} not delivered"
        )

    return _notify
