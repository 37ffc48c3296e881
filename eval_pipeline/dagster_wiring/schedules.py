"""The nightly lane materialization: one job and one schedule per lane, on one cron.

A Dagster schedule targets one job, and a job's assets must share a partitions
definition; lanes have different case sets, so each lane gets its own job and schedule,
all defined here from the same cron so they cannot drift apart. Each tick requests one run
per nightly split × nightly runtime target (``evals/runtimes.yaml``), registering their
partition keys first.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg

from eval_pipeline.core import Series, targets_file
from eval_pipeline.dagster_wiring.framework import framework_target
from eval_pipeline.dagster_wiring.partitions import partition_key, register_series
from eval_pipeline.dagster_wiring.tags import DATE_TAG, LANE_TAG, SERIES_TAG
from eval_pipeline.lanes import LaneSpec
from eval_pipeline.runtimes.targets import load_targets, nightly_targets

NIGHTLY_CRON = "0 2 * * *"
NIGHTLY_TIMEZONE = "UTC"


def job_name(spec: LaneSpec) -> str:
    return f"{spec.name}_job"


def schedule_name(spec: LaneSpec) -> str:
    return f"{spec.name}_nightly"


def series_tags(series: Series) -> dict[str, str]:
    """The tags every lane run carries, so runs can be found by lane and series in the UI (the
    case set and runtime are Dagster's own partition tags too)."""
    return {LANE_TAG: series.lane, SERIES_TAG: series.key}


def lane_job(spec: LaneSpec) -> dg.UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        name=job_name(spec),
        selection=dg.AssetSelection.groups(spec.name),
        description=f"Evaluate {spec.title}: every stage for one case set × runtime target.",
        tags={LANE_TAG: spec.name},
    )


def nightly_schedule(spec: LaneSpec, job: dg.UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=schedule_name(spec),
        cron_schedule=NIGHTLY_CRON,
        execution_timezone=NIGHTLY_TIMEZONE,
        job=job,
        description=f"Nightly: {spec.title} on splits {', '.join(spec.nightly_splits)} × every nightly "
        "runtime target.",
    )
    def _nightly(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
        date = context.scheduled_execution_time.strftime("%Y-%m-%d")
        # A framework lane runs its checkout as it is tonight; a chat lane every nightly target.
        targets = (
            [framework_target(spec).name]
            if spec.runner is not None
            else [t.name for t in nightly_targets(load_targets(targets_file()))]
        )
        register_series(context.instance, spec.name, spec.nightly_splits, targets)
        for split in spec.nightly_splits:
            for target in targets:
                yield dg.RunRequest(
                    run_key=f"{date}|{split}|{target}",
                    partition_key=partition_key(split, target),
                    tags={DATE_TAG: date, **series_tags(Series(spec.name, split, target, split))},
                )

    return _nightly
