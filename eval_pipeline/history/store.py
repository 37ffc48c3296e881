"""Append-only Parquet history, hive-partitioned by lane and date.

Layout (one file per run, per table)::

    <root>/<table>/lane=<lane>/date=<YYYY-MM-DD>/<run_id>.parquet

and, once a month has been compacted (see :mod:`eval_pipeline.history.compact`), one file
per table per lane per month that holds those runs' rows plus an in-row ``run_date``::

    <root>/<table>/lane=<lane>/date=<YYYY-MM>/compacted.parquet

``root`` is a local folder or any fsspec URL. A write goes to a temporary name in the same
folder and is then renamed, so a reader never sees half a file; writing a run that is
already there (as its own file or inside a compacted file) does nothing, so retries are safe.
"""

from __future__ import annotations

import json
import re
import uuid

import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from eval_pipeline.tables import SCHEMAS, to_arrow

HISTORY_TABLES: tuple[str, ...] = ("metrics", "case_predicates", "transcripts")
COMPACTED_NAME = "compacted.parquet"
# Parquet key-value metadata of a compacted file: JSON list of "<YYYY-MM-DD>/<run_id>" it holds.
COMPACTED_RUNS_KEY = b"eval_pipeline.compacted_runs"
_SAFE = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _check_part(name: str, value: str) -> str:
    if not _SAFE.match(value):
        raise ValueError(f"{name} {value!r} cannot be used in a history path")
    return value


def partition_folder(root: str, table: str, lane: str, date: str) -> str:
    """The hive folder of one lane and date (a day, or a month for compacted files)."""
    if table not in HISTORY_TABLES:
        raise ValueError(f"{table!r} is not a history table; expected one of {HISTORY_TABLES}")
    return "/".join(
        [root.rstrip("/"), table, f"lane={_check_part('lane', lane)}", f"date={_check_part('date', date)}"]
    )


def run_file(root: str, table: str, lane: str, date: str, run_id: str) -> str:
    """The path (or URL) of one run's file for ``table``."""
    return f"{partition_folder(root, table, lane, date)}/{_check_part('run_id', run_id)}.parquet"


def append_run(root: str, table: str, df: pd.DataFrame, *, lane: str, date: str, run_id: str) -> str | None:
    """Write one run's rows of ``table`` atomically; return the path, or None if already stored.

    ``df`` must carry the table's contract columns (see :mod:`eval_pipeline.tables`); the
    partition columns ``lane`` and ``date`` live in the path, ``lane`` also in the rows.
    """
    target = run_file(root, table, lane, date, run_id)
    fs, path = fsspec.core.url_to_fs(target)
    if fs.exists(path) or run_key(date, run_id) in compacted_runs(root, table, lane, date[:7]):
        return None
    write_atomically(fs, path, to_arrow(SCHEMAS[table], df))
    return target


def write_atomically(fs: fsspec.AbstractFileSystem, path: str, table: pa.Table) -> None:
    """Write ``table`` to a temporary name beside ``path``, then rename it into place."""
    folder, name = path.rsplit("/", 1)
    fs.makedirs(folder, exist_ok=True)
    temp = f"{folder}/.{name}.{uuid.uuid4().hex}.tmp"
    try:
        with fs.open(temp, "wb") as handle:
            pq.write_table(table, handle, compression="zstd")
        fs.mv(temp, path)
    finally:
        if fs.exists(temp):
            fs.rm(temp)


def run_key(date: str, run_id: str) -> str:
    """How a compacted file names a run it holds (a run id is unique within a lane and day)."""
    return f"{date}/{run_id}"


def compacted_file(root: str, table: str, lane: str, month: str) -> str:
    """The path (or URL) of the compacted file of one table, lane and month (``YYYY-MM``)."""
    return f"{partition_folder(root, table, lane, month)}/{COMPACTED_NAME}"


def compacted_runs(root: str, table: str, lane: str, month: str) -> frozenset[str]:
    """The run keys (:func:`run_key`) held by a month's compacted file; empty if there is none."""
    fs, path = fsspec.core.url_to_fs(compacted_file(root, table, lane, month))
    if not fs.exists(path):
        return frozenset()
    with fs.open(path, "rb") as handle:
        metadata = pq.read_schema(handle).metadata or {}
    return frozenset(json.loads(metadata.get(COMPACTED_RUNS_KEY, b"[]")))


def table_glob(root: str, table: str) -> str:
    """The glob DuckDB's ``read_parquet`` takes for one history table."""
    return f"{root.rstrip('/')}/{table}/**/*.parquet"
