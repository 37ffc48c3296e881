"""Which nightly series have gone stale: their last committed run, read from history."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

import pandas as pd

from eval_pipeline.core import Series
from eval_pipeline.history import connect
from eval_pipeline.history.runs import latest_runs
from eval_pipeline.notify.events import Event, LaneRun, stale_events


def stale_series_events(
    history_root: str, series: Collection[Series], *, now: datetime, window: timedelta
) -> list[Event]:
    """A ``stale`` event for each of ``series`` whose last run in history started more than
    ``window`` before ``now`` (a series that never ran has nothing to be stale from)."""
    con = connect(history_root)
    try:
        latest = latest_runs(con)
    finally:
        con.close()
    last_runs = []
    for row in latest.to_dict("records"):
        of = Series.from_row(row)
        if of not in series or pd.isna(row["started_at"]):
            continue
        run = LaneRun(of, run_id=str(row["run_id"]), night=str(row["date"])[:10], checks=())
        last_runs.append((run, pd.Timestamp(row["started_at"]).to_pydatetime()))
    return stale_events(last_runs, now=now, window=window)
