"""Append-only Parquet history, hive-partitioned by lane and date.

Layout (one file per run, per table)::

    <root>/<table>/lane=<lane>/date=<YYYY-MM-DD>/<run_id>.parquet

and, once a month has been compacted (see :mod:`eval_pipeline.history.compact`), one file
per table per lane per month that holds those runs' rows plus an in-row ``run_date``::

    <root>/<table>/lane=<lane>/date=<YYYY-MM>/compacted.parquet

``root`` is a local folder or any fsspec URL. A write goes to a temporary name in the same
folder (``.<name>.<random>.tmp``, which the ``*.parquet`` glob of the views never matches) and
is then renamed, so a reader never sees half a file; writing a run that is already there (as
its own file or inside a compacted file) does nothing, so retries are safe.

**Commit.** A run writes its data tables (:data:`DATA_TABLES`) with :func:`append_run`, then
its row(s) of ``run_manifests`` with :func:`commit_run`, last. The views (see
:mod:`eval_pipeline.history.views`) show a run's rows only once its manifest exists, so a run
killed at any point of the append is invisible, and a re-run (a new run id) is clean.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from eval_pipeline.core import SERIES_COLUMN_NAMES
from eval_pipeline.tables import SCHEMAS, StageFile, to_arrow

# turn_verdicts: the turn predicates' verdicts without code and evidence (tables.TURN_VERDICTS).
DATA_TABLES: tuple[str, ...] = ("metrics", "case_predicates", "turn_verdicts", "transcripts")
MANIFESTS = "run_manifests"
HISTORY_TABLES: tuple[str, ...] = (*DATA_TABLES, MANIFESTS)
COMPACTED_NAME = "compacted.parquet"
COPY_BLOCK = 8 << 20  # bytes per write when a stage file is copied into history
# Parquet key-value metadata of a compacted file: JSON list of "<YYYY-MM-DD>/<run_id>" it holds.
COMPACTED_RUNS_KEY = b"eval_pipeline.compacted_runs"
# Temporary names never end in .parquet, so a kill mid-write leaves nothing a query reads.
TEMP_PREFIX, TEMP_SUFFIX = ".", ".tmp"
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


def append_run(
    root: str, table: str, df: pd.DataFrame | StageFile, *, lane: str, date: str, run_id: str
) -> str | None:
    """Write one run's rows of ``table`` atomically; return the path, or None if already stored.

    ``df`` must carry the table's contract columns (see :mod:`eval_pipeline.tables.columns`); the
    partition columns ``lane`` and ``date`` live in the path, ``lane`` also in the rows. A
    stage file (a big run's table) in the contract's schema is copied as it is; one holding
    more columns (the turn predicates, stored as ``turn_verdicts``) is written a row group at
    a time with the contract's columns only.
    Rows of a data table stay invisible to history queries until :func:`commit_run` (for data tables).
    """
    target = run_file(root, table, lane, date, run_id)
    if is_stored(root, table, lane, date, run_id):
        return None
    fs, path = fsspec.core.url_to_fs(target)
    if isinstance(df, StageFile):
        if df.schema.names == SCHEMAS[table].names:
            write_atomically(fs, path, df)
        elif set(SCHEMAS[table].names) <= set(df.schema.names):
            write_atomically(fs, path, Projection(df, SCHEMAS[table]))
        else:
            raise ValueError(f"{df.path} holds columns {df.schema.names}, not those of {table}")
    else:
        write_atomically(fs, path, to_arrow(SCHEMAS[table], df))
    return target


def commit_run(root: str, manifest: pd.DataFrame, *, lane: str, date: str, run_id: str) -> str | None:
    """Make a run visible: write its ``run_manifests`` row(s), after every data table is stored.

    ``manifest`` follows :data:`eval_pipeline.tables.columns.RUN_MANIFESTS`, one row per lane run
    (``run_id``, ``lane`` and the series columns set). A null ``committed_at`` becomes now; a
    null ``tables`` becomes the data tables stored for the run. Tables it names that are not
    stored are an error: committing them would publish a partial run. Returns the path, or
    None when the run was already committed (idempotent, like :func:`append_run`).
    """
    if manifest.empty:
        raise ValueError(f"run {run_id!r}: an empty manifest commits nothing")
    if is_stored(root, MANIFESTS, lane, date, run_id):
        return None
    manifest = manifest.copy()
    for column, expected in (("run_id", run_id), ("lane", lane)):
        found = set(manifest[column].astype(str)) if column in manifest.columns else set()
        if found != {expected}:
            raise ValueError(
                f"run {run_id!r}: manifest column {column} holds {sorted(found)}, expected {expected!r}"
            )
    for column in SERIES_COLUMN_NAMES:
        if column not in manifest.columns or manifest[column].isna().any():
            raise ValueError(f"run {run_id!r}: manifest column {column} must be set on every row")
    for column in SCHEMAS[MANIFESTS].names:  # optional columns may be left out: null
        if column not in manifest.columns:
            manifest[column] = None
    stored = stored_tables(root, lane, date, run_id)
    manifest["committed_at"] = manifest["committed_at"].fillna(pd.Timestamp(datetime.now(UTC)))
    manifest["tables"] = manifest["tables"].fillna(",".join(stored))
    for listed in set(manifest["tables"].dropna().astype(str)):
        missing = [t for t in listed.split(",") if t and t not in stored]
        if missing:
            raise ValueError(
                f"run {run_id!r} of lane {lane!r} on {date}: tables {missing} are not stored; not committing"
            )
    return append_run(root, MANIFESTS, manifest, lane=lane, date=date, run_id=run_id)


def is_stored(root: str, table: str, lane: str, date: str, run_id: str) -> bool:
    """Whether ``table`` holds the run, as its own file or inside the month's compacted file."""
    fs, path = fsspec.core.url_to_fs(run_file(root, table, lane, date, run_id))
    return bool(fs.exists(path)) or run_key(date, run_id) in compacted_runs(root, table, lane, date[:7])


def is_committed(root: str, lane: str, run_id: str) -> bool:
    """Whether history holds a manifest of ``lane``'s run ``run_id`` under any night (as its
    own file or inside a compacted month)."""
    if not _SAFE.match(run_id):
        return False  # no run of such an id could be written
    manifests = "/".join([root.rstrip("/"), MANIFESTS, f"lane={_check_part('lane', lane)}"])
    fs, folder = fsspec.core.url_to_fs(manifests)
    if fs.glob(f"{folder}/date=*/{run_id}.parquet"):
        return True
    for path in fs.glob(f"{folder}/date=*/{COMPACTED_NAME}"):
        month = path.rsplit("/", 2)[-2].removeprefix("date=")
        if any(key.endswith(f"/{run_id}") for key in compacted_runs(root, MANIFESTS, lane, month)):
            return True
    return False


def stored_tables(root: str, lane: str, date: str, run_id: str) -> tuple[str, ...]:
    """The data tables that hold the run (see :func:`is_stored`)."""
    return tuple(t for t in DATA_TABLES if is_stored(root, t, lane, date, run_id))


@dataclass(frozen=True)
class Projection:
    """A stage file's columns of ``schema``, to be written one row group per batch."""

    stage: StageFile
    schema: pa.Schema

    def write(self, handle: Any) -> None:
        source = pq.ParquetFile(self.stage.path)
        with pq.ParquetWriter(handle, self.schema, compression="zstd") as writer:
            for index in range(source.metadata.num_row_groups):
                group = source.read_row_group(index, columns=self.schema.names)
                writer.write_table(group.cast(self.schema), row_group_size=max(group.num_rows, 1))


def write_atomically(
    fs: fsspec.AbstractFileSystem, path: str, table: pa.Table | StageFile | Projection
) -> None:
    """Write ``table`` (or copy a stage file, or write a projection of one) to a temporary name
    beside ``path``, then rename it into place."""
    folder, name = path.rsplit("/", 1)
    fs.makedirs(folder, exist_ok=True)
    temp = f"{folder}/{TEMP_PREFIX}{name}.{uuid.uuid4().hex}{TEMP_SUFFIX}"
    try:
        with fs.open(temp, "wb") as handle:
            if isinstance(table, StageFile):
                with table.path.open("rb") as source:
                    shutil.copyfileobj(source, handle, COPY_BLOCK)
            elif isinstance(table, Projection):
                table.write(handle)
            else:
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


def run_files(root: str, table: str, lane: str, date: str, run_id: str) -> list[str]:
    """The files holding one run's rows of ``table``: its own file, and the month's compacted
    file when that holds the run (both only while a compaction is between its two steps); none
    when the table does not hold the run (see :func:`is_stored`)."""
    own = run_file(root, table, lane, date, run_id)
    fs, path = fsspec.core.url_to_fs(own)
    files = [own] if fs.exists(path) else []
    if run_key(date, run_id) in compacted_runs(root, table, lane, date[:7]):
        files.append(compacted_file(root, table, lane, date[:7]))
    return files


def table_glob(root: str, table: str, lane: str | None = None) -> str:
    """The glob DuckDB's ``read_parquet`` takes for one history table (one lane's files only,
    given ``lane``)."""
    files = "**/*.parquet" if lane is None else f"lane={_check_part('lane', lane)}/**/*.parquet"
    return f"{root.rstrip('/')}/{table}/{files}"
