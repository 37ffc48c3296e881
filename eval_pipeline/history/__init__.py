"""Parquet history of every run (visible once committed), and DuckDB queries over it, per series."""

from eval_pipeline.history.charts import lane_chart_markdown, lane_chart_svg
from eval_pipeline.history.compact import compact
from eval_pipeline.history.compare import compare_runtimes
from eval_pipeline.history.comparison import MetricComparison, RunComparison, compare_runs
from eval_pipeline.history.regression import MetricFinding, find_regressions, findings_frame
from eval_pipeline.history.store import HISTORY_TABLES, append_run, commit_run, run_file, table_glob
from eval_pipeline.history.views import connect

__all__ = [
    "HISTORY_TABLES",
    "MetricComparison",
    "MetricFinding",
    "RunComparison",
    "append_run",
    "commit_run",
    "compact",
    "compare_runs",
    "compare_runtimes",
    "connect",
    "find_regressions",
    "findings_frame",
    "lane_chart_markdown",
    "lane_chart_svg",
    "run_file",
    "table_glob",
]
