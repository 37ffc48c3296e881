"""The monthly history compaction: an op job and its schedule.

No `from __future__ import annotations` here: Dagster reads the op's annotations at
definition time and cannot resolve them from strings.
"""

import dagster as dg

from eval_pipeline.dagster_wiring.resources import HistoryResource
from eval_pipeline.dagster_wiring.schedules import NIGHTLY_TIMEZONE
from eval_pipeline.history import compact

COMPACTION_CRON = "0 3 1 * *"  # 03:00 UTC on the 1st: every closed month becomes one file per lane


@dg.op(description="Rewrite every closed month's per-run history files into one file per table per lane.")
def compact_history(context: dg.OpExecutionContext, history: HistoryResource) -> None:
    for month in compact(history.resolved_root()):
        context.log.info(f"compacted {month}")


@dg.job(name="history_compaction_job", description="Monthly compaction of the Parquet history.")
def history_compaction_job() -> None:
    compact_history()


history_compaction_schedule = dg.ScheduleDefinition(
    name="history_compaction_monthly",
    cron_schedule=COMPACTION_CRON,
    execution_timezone=NIGHTLY_TIMEZONE,
    job=history_compaction_job,
    description="Keeps trend queries fast: per-run files of closed months become one file per lane.",
)
