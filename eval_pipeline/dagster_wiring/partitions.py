"""The partition definitions every lane asset, check, job, schedule and test shares.

A lane's assets are partitioned by day (the nightly unit) × split (the lane's own splits).
Today's date is a valid partition (``end_offset=1``) so an on-demand run lands on today.
"""

from __future__ import annotations

import dagster as dg

from eval_pipeline.lanes.spec import LaneSpec

DATE = "date"
SPLIT = "split"
START_DATE = "2026-05-01"

daily = dg.DailyPartitionsDefinition(start_date=START_DATE, end_offset=1)


def lane_partitions(spec: LaneSpec) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition(
        {DATE: daily, SPLIT: dg.StaticPartitionsDefinition(sorted(spec.splits))}
    )


def partition_key(date: str, split: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({DATE: date, SPLIT: split})


def date_and_split(key: str | dg.MultiPartitionKey) -> tuple[str, str]:
    """(date, split) of a lane partition key, whichever form Dagster hands us."""
    if not isinstance(key, dg.MultiPartitionKey):
        parts = dict(zip(sorted([DATE, SPLIT]), str(key).split("|"), strict=True))
        return parts[DATE], parts[SPLIT]
    dims = key.keys_by_dimension
    return dims[DATE], dims[SPLIT]
