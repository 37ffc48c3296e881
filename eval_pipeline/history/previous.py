"""A series' previous run, and what it said: for a notification's ``recovered`` and a CI
summary's baseline."""

from __future__ import annotations

import duckdb

from eval_pipeline.core import SERIES_MATCH, Series
from eval_pipeline.history.runs import find_runs


def previous_run_id(con: duckdb.DuckDBPyConnection, series: Series, run_id: str) -> str | None:
    """The committed run of the series before ``run_id`` (before every run when ``run_id`` is not
    in history yet); None when there is none."""
    row = con.execute(
        f"""
        WITH series AS (SELECT run_id, seq FROM run_order WHERE {SERIES_MATCH})
        SELECT run_id FROM series
        WHERE run_id <> ? AND seq < coalesce((SELECT seq FROM series WHERE run_id = ?), 1e18)
        ORDER BY seq DESC LIMIT 1
        """,
        [*series.params(), run_id, run_id],
    ).fetchone()
    return None if row is None else str(row[0])


def latest_run_id(con: duckdb.DuckDBPyConnection, series: Series) -> str | None:
    """The series' latest committed run; None when it has none."""
    row = con.execute(
        f"SELECT run_id FROM run_order WHERE {SERIES_MATCH} ORDER BY seq DESC LIMIT 1", series.params()
    ).fetchone()
    return None if row is None else str(row[0])


def has_runtime(con: duckdb.DuckDBPyConnection, runtime: str) -> bool:
    """Whether history holds a committed run of runtime target ``runtime``."""
    return con.execute("SELECT count(*) FROM run_order WHERE runtime = ?", [runtime]).fetchone() != (0,)


def run_failed(con: duckdb.DuckDBPyConnection, run_id: str, lane: str) -> bool:
    """Whether a committed lane run failed: an ERROR threshold failed, or it was void (every
    threshold void; one metric that measured nothing is not a failed run)."""
    row = con.execute(
        "SELECT coalesce(bool_or(verdict = 'fail'), false) "
        "OR coalesce(bool_and(verdict = 'void') FILTER (WHERE threshold IS NOT NULL), false) "
        "FROM metrics WHERE run_id = ? AND lane = ?",
        [run_id, lane],
    ).fetchone()
    return bool(row and row[0])


def metric_values(con: duckdb.DuckDBPyConnection, run_id: str, lane: str) -> dict[str, float | None]:
    """A committed lane run's metric values by name (None: not computable)."""
    rows = con.execute(
        "SELECT metric, value FROM metrics WHERE run_id = ? AND lane = ?",
        [run_id, lane],
    ).fetchall()
    return {str(metric): None if value is None or value != value else float(value) for metric, value in rows}


def named_run_id(con: duckdb.DuckDBPyConnection, prefix: str, lane: str) -> str | None:
    """The lane's run under ``prefix`` (a run id or a unique prefix of one), None when that run
    has no run of ``lane``; KeyError when no run or several match the prefix."""
    try:
        return find_runs(con, prefix, lane)[0].run_id
    except KeyError:
        if find_runs(con, prefix):
            return None
        raise
