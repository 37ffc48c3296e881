"""The nightly lane materialization: one job and one schedule per lane, on one cron.

A Dagster schedule targets one job, and a job's assets must share a partitions
definition; lanes have different splits, so each lane gets its own job and schedule,
all defined here from the same cron so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg

from eval_pipeline.dagster_wiring.partitions import lane_partitions, partition_key
from eval_pipeline.lanes.spec import LaneSpec

NIGHTLY_CRON = "0 2 * * *"
NIGHTLY_TIMEZONE = "UTC"


def job_name(spec: LaneSpec) -> str:
    return f"{spec.name}_job"


def schedule_name(spec: LaneSpec) -> str:
    return f"{spec.name}_nightly"


def lane_job(spec: LaneSpec) -> dg.UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        name=job_name(spec),
        selection=dg.AssetSelection.groups(spec.name),
        partitions_def=lane_partitions(spec),
        description=f"Materialize every stage of {spec.title} for one date × split.",
    )


def nightly_schedule(spec: LaneSpec, job: dg.UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=schedule_name(spec),
        cron_schedule=NIGHTLY_CRON,
        execution_timezone=NIGHTLY_TIMEZONE,
        job=job,
        description=f"Nightly: {spec.title} on splits {', '.join(spec.nightly_splits)}.",
    )
    def _nightly(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
        date = context.scheduled_execution_time.strftime("%Y-%m-%d")
        for split in spec.nightly_splits:
            yield dg.RunRequest(run_key=f"{date}|{split}", partition_key=partition_key(date, split))

    return _nightly
