"""Compaction: a month's per-run files become one file per table per lane per month.

Layout after compaction (see also :mod:`eval_pipeline.history.store`)::

    <root>/<table>/lane=<lane>/date=<YYYY-MM>/compacted.parquet

The hive key ``date`` of a compacted file is the month; each row carries its run's day in
an extra ``run_date`` column, and the Parquet key-value metadata
``eval_pipeline.compacted_runs`` lists the runs it holds (``<day>/<run_id>``) so that
:func:`~eval_pipeline.history.store.append_run` stays idempotent for compacted runs. The
history views read ``coalesce(run_date, date)`` as the day, so every query answers the same
before and after; a plain ``read_parquet(..., hive_partitioning = true, union_by_name = true)``
sees the month in ``date`` and the day in ``run_date``.

Steps per lane, table (``run_manifests`` last) and month: read the existing compacted file (if any) and every
per-run file of the month, skip runs the compacted file already holds, write the union to
a temporary file and rename it over ``compacted.parquet`` (the commit), then delete the
per-run files. A crash before the rename changes nothing; a crash after it leaves per-run
files whose runs are already compacted, which the next compaction deletes without adding
them twice. A reader running in the moment between the rename and the deletes
can see those runs twice; schedule compaction away from readers that must be exact.

**Uncommitted runs stay invisible.** ``run_manifests`` is compacted like the data tables, and
a data table's per-run file whose run has no manifest (a run killed before its commit, see
:func:`~eval_pipeline.history.store.commit_run`) is never copied into a compacted file: once
older than ``uncommitted_grace`` it is deleted (a killed run is never committed later: a
re-run gets a new run id), and younger it is left where it is, untouched, in case its run is
still writing (a backfill of an old night). Stale temporary files of interrupted writes are
deleted the same way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from eval_pipeline.history.store import (
    COMPACTED_NAME,
    COMPACTED_RUNS_KEY,
    DATA_TABLES,
    MANIFESTS,
    TEMP_PREFIX,
    TEMP_SUFFIX,
    compacted_file,
    compacted_runs,
    run_key,
    write_atomically,
)
from eval_pipeline.history.views import COMPACTED_DATE_COLUMN
from eval_pipeline.tables import SCHEMAS

_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
_DAY_FOLDER = re.compile(r"date=(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class CompactedMonth:
    """What one compaction wrote: a table's month of one lane."""

    table: str
    lane: str
    month: str
    runs_added: int
    runs_total: int
    rows: int
    files_removed: int
    path: str
    uncommitted_dropped: int = 0  # per-run files of runs that never committed, deleted


def compact(
    root: str,
    month: str | None = None,
    *,
    today: datetime | None = None,
    uncommitted_grace: timedelta = timedelta(days=1),
) -> list[CompactedMonth]:
    """Compact one month (``YYYY-MM``), or every month before the current one (UTC) when None.

    The current month is left alone by default because nightly runs are still landing in it.
    Per-run files of uncommitted runs younger than ``uncommitted_grace`` are left in place.
    Running it again is a no-op.
    """
    if month is not None and not _MONTH.match(month):
        raise ValueError(f"month {month!r} is not YYYY-MM")
    current = (today or datetime.now(UTC)).strftime("%Y-%m")
    cutoff = datetime.now(UTC) - uncommitted_grace  # file times are real times, whatever ``today``
    fs, base = fsspec.core.url_to_fs(root)
    base = base.rstrip("/")
    results: list[CompactedMonth] = []
    lanes = sorted(
        {f.rsplit("lane=", 1)[1] for t in (*DATA_TABLES, MANIFESTS) for f in fs.glob(f"{base}/{t}/lane=*")}
    )
    for lane in lanes:
        committed = _committed_run_ids(fs, root, base, lane)
        for table in (*DATA_TABLES, MANIFESTS):  # manifests last: what they commit is compacted first
            lane_folder = f"{base}/{table}/lane={lane}"
            if not fs.exists(lane_folder):
                continue
            months = [month] if month else sorted(_per_run_months(fs, lane_folder) - {current})
            for each in months:
                keep = None if table == MANIFESTS else committed
                done = _compact_lane_month(fs, root, table, lane, lane_folder, each, keep, cutoff)
                if done is not None:
                    results.append(done)
    return results


def _committed_run_ids(fs: fsspec.AbstractFileSystem, root: str, base: str, lane: str) -> frozenset[str]:
    """Run ids of the lane that have a manifest, per-run or compacted."""
    committed: set[str] = set()
    for path in fs.glob(f"{base}/{MANIFESTS}/lane={lane}/date=*/*.parquet"):
        folder, name = path.rsplit("/", 1)
        if name == COMPACTED_NAME:
            month = folder.rsplit("date=", 1)[1]
            committed.update(key.split("/", 1)[1] for key in compacted_runs(root, MANIFESTS, lane, month))
        else:
            committed.add(name.removesuffix(".parquet"))
    return frozenset(committed)


def _older_than(fs: fsspec.AbstractFileSystem, path: str, cutoff: datetime) -> bool:
    try:
        modified = fs.modified(path)
    except (NotImplementedError, FileNotFoundError, KeyError):  # no time known: treat as old
        return True
    if modified.tzinfo is None:
        modified = modified.replace(tzinfo=UTC)
    return bool(modified < cutoff)


def _per_run_months(fs: fsspec.AbstractFileSystem, lane_folder: str) -> set[str]:
    months = set()
    for folder in fs.ls(lane_folder, detail=False):
        match = _DAY_FOLDER.search(folder.rstrip("/"))
        if match:
            months.add(match.group(1)[:7])
    return months


def _compact_lane_month(
    fs: fsspec.AbstractFileSystem,
    root: str,
    table: str,
    lane: str,
    lane_folder: str,
    month: str,
    committed: frozenset[str] | None,
    cutoff: datetime,
) -> CompactedMonth | None:
    """Compact one table's month of one lane; ``committed`` None keeps every run (manifests)."""
    stale_temps = [
        p
        for p in fs.glob(f"{lane_folder}/date={month}*/{TEMP_PREFIX}*{TEMP_SUFFIX}")
        if _older_than(fs, p, cutoff)
    ]
    run_files = sorted(fs.glob(f"{lane_folder}/date={month}-??/*.parquet"))
    schema = SCHEMAS[table].append(pa.field(COMPACTED_DATE_COLUMN, pa.string()))
    target = fsspec.core.url_to_fs(compacted_file(root, table, lane, month))[1]
    held = set(compacted_runs(root, table, lane, month))
    parts = [_read(fs, target, schema)] if held else []
    added, dropped, removed = 0, 0, list(stale_temps)
    for path in run_files:
        day = _DAY_FOLDER.search(path.rsplit("/", 1)[0])
        if day is None:
            continue
        run_id = path.rsplit("/", 1)[1].removesuffix(".parquet")
        key = run_key(day.group(1), run_id)
        if key in held:  # left over by a compaction that stopped after its commit
            removed.append(path)
            continue
        if committed is not None and run_id not in committed:
            if _older_than(fs, path, cutoff):  # killed before its commit: it never will be
                removed.append(path)
                dropped += 1
            continue  # maybe still writing: leave it, invisible, for a later compaction
        table_rows = _conform(_read(fs, path, None), SCHEMAS[table])
        parts.append(
            table_rows.append_column(COMPACTED_DATE_COLUMN, pa.array([day.group(1)] * len(table_rows)))
        )
        held.add(key)
        added += 1
        removed.append(path)
    if not added and not removed:
        return None
    combined = pa.concat_tables(parts).cast(schema) if parts else schema.empty_table()
    if added:
        metadata = {COMPACTED_RUNS_KEY: json.dumps(sorted(held)).encode()}
        write_atomically(fs, target, combined.replace_schema_metadata(metadata))
    for path in removed:
        fs.rm(path)
    for folder in {p.rsplit("/", 1)[0] for p in removed}:
        # On an object store a "folder" is gone with its last file: nothing to remove.
        if _DAY_FOLDER.search(folder) and fs.isdir(folder) and not fs.ls(folder, detail=False):
            fs.rmdir(folder)
    files_removed = len(removed) - len(stale_temps)
    return CompactedMonth(
        table, lane, month, added, len(held), combined.num_rows, files_removed, target, dropped
    )


def _read(fs: fsspec.AbstractFileSystem, path: str, schema: pa.Schema | None) -> pa.Table:
    with fs.open(path, "rb") as handle:
        table = pq.read_table(handle)
    return table if schema is None else table.cast(schema)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A per-run file's rows with exactly the contract's columns (older files may lack some)."""
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
