"""DuckDB views over the Parquet history: ``metrics``, ``case_predicates``, ``turn_verdicts``,
``transcripts``, ``run_manifests``, ``run_order`` and ``runs``.

Each table's files, per-run and compacted alike, are read as::

    read_parquet('<root>/<table>/**/*.parquet', hive_partitioning = true, union_by_name = true)

with the table contract's columns (see :mod:`eval_pipeline.tables.columns`) plus ``date`` (DATE, the
day of the run). Per-run files carry the day in their hive key (``date=YYYY-MM-DD``);
compacted files (see :mod:`eval_pipeline.history.compact`) sit under ``date=YYYY-MM`` and
carry the day of each row in an in-row ``run_date`` column, so the views take
``coalesce(run_date, date)``. A table with no files yet is an empty view, not an error.

**Only committed runs are visible.** ``run_manifests`` holds one row per committed lane run
(written last, see :func:`eval_pipeline.history.store.commit_run`); ``metrics``,
``case_predicates``, ``turn_verdicts`` and ``transcripts`` keep only the rows whose ``(run_id, lane)`` has a
manifest, so a run killed half-way through its append shows up nowhere.

``runs`` has one row per committed lane run (from ``run_manifests``: its runtime's spec and
options too), with its metric counts (``metrics``, ``blocking_failures``, ``warnings``) and
``seq``: the run's position, 1 = oldest, in its series (lane, split, runtime, case_set),
ordered by ``started_at``, then ``date``, then ``run_id``. ``run_order`` is ``run_manifests``
with that ``seq`` and without the counts: a query that needs only the runs' order reads it, and
so never reads the ``metrics`` files.
"""

from __future__ import annotations

import os
import re

import duckdb
import fsspec
import pyarrow as pa

from eval_pipeline.core import SERIES_SQL
from eval_pipeline.history.runs import RunRef
from eval_pipeline.history.store import DATA_TABLES, HISTORY_TABLES, MANIFESTS, run_files, table_glob
from eval_pipeline.metrics import verdict_sql
from eval_pipeline.tables import SCHEMAS

COMPACTED_DATE_COLUMN = "run_date"

# A data table's view: its rows of committed runs only.
_DATA_VIEW = (
    "CREATE OR REPLACE TEMP VIEW {table} AS SELECT t.* FROM ({source}) t "
    f"SEMI JOIN {MANIFESTS} m ON t.run_id = m.run_id AND t.lane = m.lane"
)

_RUN_ORDER_VIEW = f"""
CREATE OR REPLACE TEMP VIEW run_order AS
SELECT m.*, row_number() OVER (PARTITION BY {SERIES_SQL} ORDER BY m.started_at, m.date, m.run_id) AS seq
FROM {MANIFESTS} m
"""

_RUNS_VIEW = f"""
CREATE OR REPLACE TEMP VIEW runs AS
SELECT m.run_id, m.lane, m.split, m.runtime, m.case_set, m.runtime_spec, m.runtime_options, m.date,
       m.partition_date, m.started_at, m.cases_sha256, m.pipeline_version,
       coalesce(c.metrics, 0) AS metrics,
       coalesce(c.blocking_failures, 0) AS blocking_failures,
       coalesce(c.warnings, 0) AS warnings,
       coalesce(json_extract_string(m.outcome, '$.verdict'), {verdict_sql("c.verdicts")}) AS verdict,
       m.seq
FROM run_order m
LEFT JOIN (
    SELECT run_id, {SERIES_SQL},
           count(*) AS metrics,
           count(*) FILTER (WHERE passed = false AND severity = 'ERROR') AS blocking_failures,
           count(*) FILTER (WHERE passed = false AND severity = 'WARN') AS warnings,
           CASE WHEN count(*) FILTER (WHERE threshold IS NOT NULL) > 0
                     AND bool_and(verdict = 'void') FILTER (WHERE threshold IS NOT NULL)
                THEN ['void'] ELSE list(DISTINCT verdict) END AS verdicts
    FROM metrics
    GROUP BY run_id, {SERIES_SQL}
) c USING (run_id, {SERIES_SQL})
"""


def connect(
    root: str,
    filesystem: fsspec.AbstractFileSystem | None = None,
    *,
    lane: str | None = None,
    tables: tuple[str, ...] = DATA_TABLES,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the history views over ``root`` (folder or fsspec URL).

    ``filesystem``, when given, is the filesystem ``root`` is a URL of (registered with DuckDB);
    otherwise it is the one fsspec finds for ``root``. ``lane``, when given, scopes every view
    to that lane's runs: only its files are listed and read, whatever the other lanes hold.
    ``tables``: the data tables whose views read their files now (the others are empty until
    :func:`refresh` or :func:`scope_to_run` makes them).

    ``run_manifests`` is read once, when connecting, into a temporary table: the connection
    sees the runs committed at that moment, and a run committing while it queries never
    shows up half-way. (It also keeps every query from reading each manifest file again.)

    A local ``root``'s connection is a cursor of one in-memory database per process, its views
    and tables temporary (its own): opening a database costs more than a lane's questions.
    """
    fs = filesystem if filesystem is not None else fsspec.core.url_to_fs(root)[0]
    local = "file" in _protocols(fs)
    if filesystem is None and local:
        con = _local_database().cursor()
    else:  # a filesystem of its own (and its settings, such as history --sql's) needs its own database
        con = duckdb.connect()
        if not local:
            con.register_filesystem(fs)
    con.execute("SET TimeZone = 'UTC'")  # timestamps print the same on every machine
    for table in HISTORY_TABLES:
        con.register(f"_stub_{table}", _stub(table))
    for table in DATA_TABLES:
        con.execute(f"CREATE TEMP VIEW {table} AS {_empty_source(table)}")
    refresh(con, root, tables, lane=lane)
    return con


# Each process's in-memory database, by process id. A forked child opens its own and leaves its
# parent's alone: the parent's threads did not come along, and closing it (or letting it go)
# would wait on them; nothing may run at the fork either (a child about to exec runs no Python).
_DATABASES: dict[int, duckdb.DuckDBPyConnection] = {}


def _local_database() -> duckdb.DuckDBPyConnection:
    """This process's in-memory database (opened on first use), whose cursors :func:`connect`
    hands out."""
    pid = os.getpid()
    database = _DATABASES.get(pid)
    if database is None:
        database = _DATABASES.setdefault(pid, duckdb.connect())
    return database


def refresh(
    con: duckdb.DuckDBPyConnection,
    root: str,
    tables: tuple[str, ...] = DATA_TABLES,
    *,
    lane: str | None = None,
) -> None:
    """(Re)create the views of a connection of :func:`connect` over ``root`` as it is now: a
    connection refreshed sees the runs committed since it connected. Naming ``tables`` refreshes
    those views (and ``runs``) only: making a view reads the schema of each of its table's
    files, so a caller about to read one table need not pay for the others. (A view made while
    its table had no files stays empty until it is refreshed.) ``lane``: as the connection was
    made (:func:`connect`)."""
    _create(
        con, f"CREATE OR REPLACE TEMP TABLE {MANIFESTS} AS SELECT * FROM ({{source}})", root, MANIFESTS, lane
    )
    for table in tables:
        _create(con, _DATA_VIEW.format(table=table, source="{source}"), root, table, lane)
    con.execute(_RUN_ORDER_VIEW)
    con.execute(_RUNS_VIEW)


def scope_to_run(con: duckdb.DuckDBPyConnection, root: str, ref: RunRef) -> None:
    """Make the data views of a connection of :func:`connect` read one committed run's files
    only (``ref``: a lane run with its date, as the ``runs`` view gives it; a compacted month's
    file holds the month's other runs too, so a question selects the run's rows): what a
    question about that run alone reads, without opening every file of its lane. The
    manifests, and so ``run_order``, are left as they were (``runs`` then counts that run's
    metrics only); :func:`refresh` makes the views whole again."""
    if ref.date is None:
        raise ValueError(f"run {ref.run_id}: its date says where its files are; it has none")
    day = ref.date.isoformat()
    for table in DATA_TABLES:
        files = run_files(root, table, ref.series.lane, day, ref.run_id)
        source = _files_source(table, files) if files else _empty_source(table)
        con.execute(_DATA_VIEW.format(table=table, source=source))


def files_sql(root: str, table: str, lane: str | None = None) -> str:
    """The SELECT over every stored file of one table (of one lane, given ``lane``), committed
    or not (the views' source)."""
    return _files_source(table, [table_glob(root, table, lane)])


def _files_source(table: str, files: list[str]) -> str:
    """The SELECT over ``files`` (paths or globs) of one table, in the contract's columns and
    ``date``."""
    listed = ", ".join("'" + path.replace("'", "''") + "'" for path in files)
    columns = ", ".join(f'"{name}"' for name in SCHEMAS[table].names)
    return (
        f"SELECT {columns}, CAST(coalesce({COMPACTED_DATE_COLUMN}, date) AS DATE) AS date FROM ("
        f"SELECT * FROM _stub_{table} UNION ALL BY NAME "
        f"SELECT * FROM read_parquet([{listed}], hive_partitioning = true, union_by_name = true, "
        f"hive_types = {{'date': 'VARCHAR'}}))"
    )


def _empty_source(table: str) -> str:
    """The SELECT of no rows, in the columns of :func:`files_sql`."""
    return f"SELECT * EXCLUDE ({COMPACTED_DATE_COLUMN}, date), CAST(date AS DATE) AS date FROM _stub_{table}"


def _create(con: duckdb.DuckDBPyConnection, statement: str, root: str, table: str, lane: str | None) -> None:
    # The empty stub fixes the columns and types, whichever files exist (old files may lack
    # newer columns; only compacted files carry run_date).
    try:
        con.execute(statement.format(source=files_sql(root, table, lane)))
    except duckdb.IOException:  # no files yet: empty, with the contract's columns
        con.execute(statement.format(source=_empty_source(table)))


def _stub(table: str) -> pa.Table:
    schema = SCHEMAS[table].append(pa.field(COMPACTED_DATE_COLUMN, pa.string()))
    return schema.append(pa.field("date", pa.string())).empty_table()


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def reading_error(exc: BaseException) -> str:
    """Why history could not be read, in a line: DuckDB wraps a filesystem's error in its
    traceback and the query text, so the last ``SomethingError: message`` line is the reason."""
    text = str(exc)
    causes = re.findall(r"^(\w+(?:Error|Exception): .+)$", text, re.MULTILINE)
    if causes:
        return str(causes[-1])
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}"
