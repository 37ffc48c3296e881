"""DuckDB views over the Parquet history: ``metrics``, ``case_predicates``, ``transcripts``, ``runs``.

Each table view reads every file of its table, per-run and compacted alike::

    read_parquet('<root>/<table>/**/*.parquet', hive_partitioning = true, union_by_name = true)

and exposes the table contract's columns (see :mod:`eval_pipeline.tables`) plus ``date``
(DATE, the day of the run). Per-run files carry the day in their hive key
(``date=YYYY-MM-DD``); compacted files (see :mod:`eval_pipeline.history.compact`) sit under
``date=YYYY-MM`` and carry the day of each row in an in-row ``run_date`` column, so the views
take ``coalesce(run_date, date)``. A table with no files yet is an empty view, not an error.

``runs`` has one row per run of a lane split (key: ``run_id, lane, split, runtime``), with
``seq``: the run's position, 1 = oldest, in its series (same lane, split and runtime),
ordered by ``started_at``, then ``date``, then ``run_id``.
"""

from __future__ import annotations

import duckdb
import fsspec
import pyarrow as pa

from eval_pipeline.history.store import HISTORY_TABLES, table_glob
from eval_pipeline.tables import SCHEMAS

RUN_KEY: tuple[str, ...] = ("run_id", "lane", "split", "runtime")
SERIES_KEY: tuple[str, ...] = ("lane", "split", "runtime")
COMPACTED_DATE_COLUMN = "run_date"

_RUNS_VIEW = """
CREATE OR REPLACE VIEW runs AS
SELECT *,
       row_number() OVER (PARTITION BY lane, split, runtime ORDER BY started_at, date, run_id) AS seq
FROM (
    SELECT run_id, lane, split, runtime,
           min(date) AS date,
           any_value(partition_date) AS partition_date,
           min(started_at) AS started_at,
           any_value(cases_sha256) AS cases_sha256,
           any_value(pipeline_version) AS pipeline_version,
           count(*) AS metrics,
           count(*) FILTER (WHERE passed = false AND severity = 'ERROR') AS blocking_failures,
           count(*) FILTER (WHERE passed = false AND severity = 'WARN') AS warnings
    FROM metrics
    GROUP BY run_id, lane, split, runtime
)
"""


def connect(root: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the history views over ``root`` (folder or fsspec URL)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")  # timestamps print the same on every machine
    fs, _ = fsspec.core.url_to_fs(root)
    if "file" not in _protocols(fs):
        con.register_filesystem(fs)
    for table in HISTORY_TABLES:
        _create_table_view(con, root, table)
    con.execute(_RUNS_VIEW)
    return con


def view_sql(root: str, table: str) -> str:
    """The SELECT behind one table view (also useful from any DuckDB client)."""
    glob = table_glob(root, table).replace("'", "''")
    columns = ", ".join(f'"{name}"' for name in SCHEMAS[table].names)
    return (
        f"SELECT {columns}, CAST(coalesce({COMPACTED_DATE_COLUMN}, date) AS DATE) AS date FROM ("
        f"SELECT * FROM _stub_{table} UNION ALL BY NAME "
        f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true, union_by_name = true, "
        f"hive_types = {{'date': 'VARCHAR'}}))"
    )


def _create_table_view(con: duckdb.DuckDBPyConnection, root: str, table: str) -> None:
    # The empty stub fixes the view's columns and types, whichever files exist (old files may
    # lack newer columns; only compacted files carry run_date).
    con.register(f"_stub_{table}", _stub(table))
    try:
        con.execute(f"CREATE OR REPLACE VIEW {table} AS {view_sql(root, table)}")
    except duckdb.IOException:  # no files yet: an empty view of the contract
        con.execute(
            f"CREATE OR REPLACE VIEW {table} AS SELECT * EXCLUDE ({COMPACTED_DATE_COLUMN}, date), "
            f"CAST(date AS DATE) AS date FROM _stub_{table}"
        )


def _stub(table: str) -> pa.Table:
    schema = SCHEMAS[table].append(pa.field(COMPACTED_DATE_COLUMN, pa.string()))
    return schema.append(pa.field("date", pa.string())).empty_table()


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)
