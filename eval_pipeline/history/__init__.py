"""Parquet history of every run, and DuckDB queries over it."""

from eval_pipeline.history.store import HISTORY_TABLES, append_run, run_file, table_glob

__all__ = ["HISTORY_TABLES", "append_run", "run_file", "table_glob"]
