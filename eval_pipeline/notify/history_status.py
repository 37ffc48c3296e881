"""Whether a series' previous run failed, read from history (what ``recovered`` needs)."""

from __future__ import annotations

from eval_pipeline.history.views import connect
from eval_pipeline.notify.events import LaneRun


def previous_run_failed(history_root: str, run: LaneRun) -> bool | None:
    """Whether the committed run of ``run``'s series before it failed (an ERROR threshold
    failed, or it was void); None when the series has no earlier run."""
    con = connect(history_root)
    try:
        row = con.execute(
            """
            WITH series AS (
                SELECT run_id, seq FROM runs
                WHERE lane = ? AND split = ? AND runtime = ? AND case_set = ?
            ),
            previous AS (
                SELECT run_id FROM series
                WHERE run_id <> ? AND seq < coalesce((SELECT seq FROM series WHERE run_id = ?), 1e18)
                ORDER BY seq DESC LIMIT 1
            )
            SELECT (SELECT run_id FROM previous),
                   coalesce(bool_or(verdict IN ('fail', 'void')), false)
            FROM metrics
            WHERE run_id = (SELECT run_id FROM previous) AND lane = ?
            """,
            [run.lane, run.split, run.runtime, run.case_set, run.run_id, run.run_id, run.lane],
        ).fetchone()
    finally:
        con.close()
    if row is None or row[0] is None:
        return None
    return bool(row[1])
