"""Naming runs: a run of a lane split is ``(run_id, lane, split, runtime)``.

One Dagster run can materialize several lanes, so a ``run_id`` alone may name several
lane runs; every question about history is asked of :class:`RunRef` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

import duckdb
import pandas as pd


@dataclass(frozen=True)
class RunRef:
    """One run of one lane split against one runtime."""

    run_id: str
    lane: str
    split: str
    runtime: str
    date: date | None = None

    def params(self) -> list[str]:
        """Values for ``run_id = ? AND lane = ? AND split = ? AND runtime = ?``."""
        return [self.run_id, self.lane, self.split, self.runtime]

    def label(self) -> str:
        day = f" {self.date.isoformat()}" if self.date else ""
        return f"{self.lane}/{self.split} [{self.runtime}] {self.run_id}{day}"


def is_missing(value: object) -> bool:
    """None, NaN, pd.NA or NaT: how DuckDB's NULL arrives in a pandas cell."""
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value)


RUN_MATCH = "run_id = ? AND lane = ? AND split = ? AND runtime = ?"


def ref_from_row(row: Any) -> RunRef:
    day = row["date"]
    return RunRef(
        str(row["run_id"]),
        str(row["lane"]),
        str(row["split"]),
        str(row["runtime"]),
        None if is_missing(day) else pd.Timestamp(day).date(),
    )


def find_runs(con: duckdb.DuckDBPyConnection, run_id: str, lane: str | None = None) -> list[RunRef]:
    """Every lane run stored under ``run_id`` (optionally of one lane); KeyError when there is none."""
    rows = con.execute(
        "SELECT * FROM runs WHERE run_id = ? AND (? IS NULL OR lane = ?) ORDER BY lane, split, runtime",
        [run_id, lane, lane],
    ).df()
    if rows.empty:
        where = f" in lane {lane!r}" if lane else ""
        raise KeyError(f"no run {run_id!r}{where} in history")
    return [ref_from_row(row) for _, row in rows.iterrows()]


def previous_run(con: duckdb.DuckDBPyConnection, run: RunRef) -> RunRef | None:
    """The run just before ``run`` in its series (same lane, split, runtime), if any."""
    rows = con.execute(
        "SELECT * FROM runs WHERE lane = ? AND split = ? AND runtime = ? "
        f"AND seq < (SELECT seq FROM runs WHERE {RUN_MATCH}) ORDER BY seq DESC LIMIT 1",
        [run.lane, run.split, run.runtime, *run.params()],
    ).df()
    return None if rows.empty else ref_from_row(rows.iloc[0])


def latest_runs(con: duckdb.DuckDBPyConnection, *, lane: str | None = None, last: int = 1) -> pd.DataFrame:
    """The last ``last`` runs of every series (optionally of one lane), oldest first."""
    if last < 1:
        raise ValueError(f"--last must be at least 1, got {last}")
    return con.execute(
        "SELECT * FROM runs r WHERE (? IS NULL OR lane = ?) "
        "AND seq > (SELECT max(seq) FROM runs m WHERE m.lane = r.lane AND m.split = r.split "
        "AND m.runtime = r.runtime) - ? ORDER BY lane, split, runtime, seq",
        [lane, lane, last],
    ).df()
