"""``history --sql``: a person's query over the history views, on a connection that can only read.

The views are created first; then the connection is locked down: file access is limited to the
history root (``allowed_directories``; ``enable_external_access = false`` refuses every other
path, extension installs and ``ATTACH``), the configuration is locked so a query cannot undo
that, and only query statements run (``COPY``, ``EXPORT``, ``CREATE``, ``INSERT``… are refused
before they reach DuckDB, since the root itself stays readable, and writable by DuckDB).
"""

from __future__ import annotations

import os

import duckdb
import fsspec
import pandas as pd

from eval_pipeline.history.views import connect

READ_ONLY_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


class QueryRefused(ValueError):
    """The query is not a read-only query over the history views."""


def read_only_connection(root: str) -> duckdb.DuckDBPyConnection:
    """The history views over ``root`` on a connection that reads nothing outside ``root``."""
    con = connect(root)
    con.execute("SET allowed_directories = ?", [[_allowed_prefix(root)]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def run_query(con: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    """The result of one read-only statement (SELECT, WITH … SELECT, FROM …, DESCRIBE, EXPLAIN)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(str(exc)) from None
    if len(statements) != 1:
        raise QueryRefused(f"expected one SQL statement, got {len(statements)}")
    (statement,) = statements
    if statement.type not in READ_ONLY_STATEMENTS:
        raise QueryRefused(
            f"{statement.type.name} statements are not allowed: history --sql only reads (SELECT, EXPLAIN)"
        )
    return con.execute(sql).df()


def _allowed_prefix(root: str) -> str:
    fs, _ = fsspec.core.url_to_fs(root)
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if "file" in protocols and "://" not in root:
        return root.rstrip("/") + "/" if os.path.isabs(root) else os.path.abspath(root) + "/"
    return root.rstrip("/") + "/"
