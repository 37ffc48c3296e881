"""Naming runs: a run of a lane split is its ``run_id`` and its series (:mod:`eval_pipeline.core.series`:
what it is compared with).

One Dagster run can materialize several lanes, so a ``run_id`` alone may name several
lane runs; every question about history is asked of :class:`RunRef` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

import duckdb
import pandas as pd

from eval_pipeline.core import SERIES_MATCH, SERIES_SQL, OfSeries, Series


@dataclass(frozen=True)
class RunRef(OfSeries):
    """One committed run of one series."""

    run_id: str
    series: Series
    date: date | None = None
    cases_sha256: str | None = None  # which case files, byte for byte (not part of the identity)

    def params(self) -> list[str]:
        """Values for :data:`RUN_MATCH`."""
        return [self.run_id, *self.series.params()]

    def label(self) -> str:
        day = f" {self.date.isoformat()}" if self.date else ""
        return f"{self.series.label} {self.run_id}{day}"


RUN_MATCH = f"run_id = ? AND {SERIES_MATCH}"


def is_missing(value: object) -> bool:
    """None, NaN, pd.NA or NaT: how DuckDB's NULL arrives in a pandas cell."""
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value)


def ref_from_row(row: Any) -> RunRef:
    """A RunRef from a row of the ``runs`` view."""
    day, sha = row["date"], row.get("cases_sha256")
    return RunRef(
        str(row["run_id"]),
        Series.from_row(row),
        None if is_missing(day) else pd.Timestamp(day).date(),
        None if is_missing(sha) else str(sha),
    )


def resolve_run_id(con: duckdb.DuckDBPyConnection, prefix: str) -> str:
    """The committed run id ``prefix`` is, or the one starting with it (tables show 8
    characters; any unique prefix will do). KeyError when none or several match, naming the
    candidates."""
    text = prefix.strip().lower()
    if not text:
        raise KeyError("a run id (or a unique prefix of one) is required")
    matches = [
        str(row[0])
        for row in con.execute(
            "SELECT DISTINCT run_id FROM runs WHERE starts_with(lower(run_id), ?) ORDER BY run_id", [text]
        ).fetchall()
    ]
    if not matches:
        raise KeyError(f"no run {prefix!r} in history")
    whole = [m for m in matches if m.lower() == text]
    if len(whole) == 1:  # a whole id names its run, even when it begins another one
        return whole[0]
    if len(matches) > 1:
        shown = ", ".join(m[: len(text) + 4] for m in matches[:5])
        raise KeyError(f"run id prefix {prefix!r} is ambiguous: {len(matches)} runs match ({shown}…)")
    return matches[0]


def find_runs(con: duckdb.DuckDBPyConnection, run_id: str, lane: str | None = None) -> list[RunRef]:
    """Every committed lane run under ``run_id`` or a unique prefix of it (optionally of one
    lane); KeyError when there is none."""
    run_id = resolve_run_id(con, run_id)
    rows = con.execute(
        f"SELECT * FROM runs WHERE run_id = ? AND (? IS NULL OR lane = ?) ORDER BY {SERIES_SQL}",
        [run_id, lane, lane],
    ).df()
    if rows.empty:
        where = f" in lane {lane!r}" if lane else ""
        raise KeyError(f"no run {run_id!r}{where} in history")
    return [ref_from_row(row) for _, row in rows.iterrows()]


def stored_runtimes(
    con: duckdb.DuckDBPyConnection, names: list[str] | None = None
) -> list[tuple[str, str | None, str | None]]:
    """Each runtime name's spec and options (JSON text, or null), as its latest committed run
    stored them: what :func:`eval_pipeline.runtimes.names.decoded_runtimes` decodes. ``names``:
    only those runtimes."""
    rows = con.execute(
        "SELECT runtime, arg_max(runtime_spec, (started_at, date, run_id)), "
        "arg_max(runtime_options::VARCHAR, (started_at, date, run_id)) FROM run_manifests "
        "WHERE runtime_spec IS NOT NULL AND (?::VARCHAR[] IS NULL OR list_contains(?, runtime)) "
        "GROUP BY runtime ORDER BY runtime",
        [names, names],
    ).fetchall()
    return [(str(name), spec, options) for name, spec, options in rows]


def latest_runs(con: duckdb.DuckDBPyConnection, *, lane: str | None = None, last: int = 1) -> pd.DataFrame:
    """The last ``last`` runs of every series (optionally of one lane), oldest first."""
    if last < 1:
        raise ValueError(f"--last must be at least 1, got {last}")
    return con.execute(
        f"SELECT * FROM runs WHERE (? IS NULL OR lane = ?) "
        f"QUALIFY seq > max(seq) OVER (PARTITION BY {SERIES_SQL}) - ? ORDER BY {SERIES_SQL}, seq",
        [lane, lane, last],
    ).df()
