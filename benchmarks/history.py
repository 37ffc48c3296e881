"""History query speed on a synthetic 10-year nightly history, before and after compaction.

Writes, through the real store (``append_run``, one file per run per table), a nightly
history of 4 lanes × ``--years`` years with 20 metrics and 100 cases × 6 predicates per run,
then prints the time of a one-metric trend query and of a diff between two runs: through the
DuckDB views, per-run layout and compacted, against loading the same history with pandas.
Each run's tables are built as the pipeline builds them: metric values judged against their
thresholds (``scoring.judge``), made into rows by ``pipeline.metric_rows`` and every table by
``tables.frame``, so a run here has the columns a real run has. Run with
``python benchmarks/history.py [--out DIR] [--years N]``.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from eval_pipeline import __version__
from eval_pipeline.core.series import Series
from eval_pipeline.history.compact import compact
from eval_pipeline.history.diff import diff_runs
from eval_pipeline.history.runs import RunRef
from eval_pipeline.history.store import append_run, commit_run
from eval_pipeline.history.views import connect
from eval_pipeline.lanes.spec import ThresholdSpec
from eval_pipeline.metrics.scoring import ERROR_RATE, MetricValue, count, judge
from eval_pipeline.run.pipeline import metric_rows
from eval_pipeline.tables.columns import CASE_PREDICATES, METRICS, RUN_MANIFESTS, frame

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--years 0.02 --workers 1": [
        r"^trend \(1 metric, 1 lane\)( +[0-9.]+s){4}$",
        r"^diff of two runs( +[0-9.]+s){4}$",
    ]
}

LANES = ("lane_a", "lane_b", "lane_c", "lane_d")
RATES = [f"metric_{i:02d}_rate" for i in range(18)]  # with `cases` and error_rate: 20 metrics
CASES = [f"case_{i:03d}" for i in range(100)]
PREDICATES = [f"predicate_{i}" for i in range(6)]
SPLIT, RUNTIME = "public", "reference"
THRESHOLDS = [
    ThresholdSpec(metric=name, op=">=", value=0.85, severity="WARN", reason="Benchmark floor.")
    for name in RATES
]


def metrics_table(
    values: Sequence[MetricValue], thresholds: Sequence[ThresholdSpec], **columns: object
) -> pd.DataFrame:
    """A run's metrics table as the pipeline's metrics stage builds it: ``values`` judged against
    ``thresholds`` (``scoring.judge``), made into rows by ``pipeline.metric_rows``, the table by
    ``tables.frame``, ``columns`` (the run columns, its night, …) filling whole columns."""
    rows = metric_rows(values, judge(thresholds, values))
    return frame(METRICS, rows, **{"pipeline_version": __version__, **columns})


def run_tables(lane: str, day: date, seed: int) -> dict[str, pd.DataFrame]:
    """One run's metrics, case_predicates and manifest, with a few random flips per night."""
    rng = np.random.default_rng(seed)
    run_columns = {"run_id": f"{lane}-{day.isoformat()}", "lane": lane, "split": SPLIT}
    run_columns |= {"runtime": RUNTIME, "case_set": SPLIT}
    started_at = datetime(day.year, day.month, day.day, 2, tzinfo=UTC)
    passed = rng.random(len(CASES) * len(PREDICATES)) > 0.05
    case_rows = [
        {
            "case_id": case_id,
            "predicate": predicate,
            "passed": bool(holds),
            "severity": "hard",
            "code": "ok" if holds else "failed",
            "message": "",
            "evidence": "{}",
            "sample_index": 0,
        }
        for (case_id, predicate), holds in zip(itertools.product(CASES, PREDICATES), passed, strict=True)
    ]
    numerators = rng.integers(80, 101, len(RATES))
    values = [
        *(MetricValue(name, n / 100, float(n), 100.0) for name, n in zip(RATES, numerators, strict=True)),
        count("cases", len(CASES)),
        MetricValue(ERROR_RATE, 0.0, 0.0, float(len(CASES))),
    ]
    night = {"partition_date": day.isoformat(), "started_at": started_at, "cases_sha256": "0" * 64}
    metrics = metrics_table(values, THRESHOLDS, **run_columns, **night)
    manifest = frame(
        RUN_MANIFESTS,
        [{**night, "runtime_spec": RUNTIME}],  # commit_run fills committed_at and tables
        **run_columns,
        pipeline_version=__version__,
    )
    return {
        "metrics": metrics,
        "case_predicates": frame(CASE_PREDICATES, case_rows, **run_columns),
        "run_manifests": manifest,
    }


def write_lane(args: tuple[str, str, int]) -> int:
    root, lane, nights = args
    start = date(2015, 1, 1)
    for offset in range(nights):
        day = start + timedelta(days=offset)
        tables = run_tables(lane, day, seed=LANES.index(lane) * 100_000 + offset)
        run_id = f"{lane}-{day.isoformat()}"
        for table in ("metrics", "case_predicates"):
            append_run(root, table, tables[table], lane=lane, date=day.isoformat(), run_id=run_id)
        commit_run(root, tables["run_manifests"], lane=lane, date=day.isoformat(), run_id=run_id)
    return nights


def timed(action: Callable[[], object], repeat: int = 3) -> float:
    """Best of ``repeat`` wall times, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def trend_duckdb(root: str) -> pd.DataFrame:
    with connect(root) as con:
        return con.execute(
            "SELECT date, value FROM metrics WHERE lane = ? AND split = ? AND runtime = ? AND metric = ? ORDER BY date",
            ["lane_b", SPLIT, RUNTIME, "metric_07_rate"],
        ).df()


def trend_pandas(root: str) -> pd.DataFrame:
    metrics = pd.read_parquet(f"{root}/metrics", partitioning=None)  # lane is in the rows
    rows = metrics[(metrics["lane"] == "lane_b") & (metrics["metric"] == "metric_07_rate")]
    return rows.sort_values("started_at")[["started_at", "value"]]


def diff_duckdb(root: str, a: RunRef, b: RunRef) -> int:
    with connect(root) as con:
        return len(diff_runs(con, a, b).flips)


def diff_pandas(root: str, a: RunRef, b: RunRef) -> int:
    cases = pd.read_parquet(f"{root}/case_predicates", partitioning=None)
    before = cases[(cases["run_id"] == a.run_id) & (cases["lane"] == a.lane)]
    after = cases[(cases["run_id"] == b.run_id) & (cases["lane"] == b.lane)]
    joined = before.merge(after, on=["case_id", "predicate"], suffixes=("_a", "_b"))
    return int((joined["passed_a"] != joined["passed_b"]).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="history folder to write (default: a temporary folder, removed after)")
    parser.add_argument("--years", type=float, default=10, help="nights per lane: 365 a year")
    parser.add_argument("--workers", type=int, default=2)
    options = parser.parse_args()
    days = round(365 * options.years)
    if days < 2:
        parser.error(f"--years {options.years:g} is {days} night(s) a lane; the diff needs two")
    root = options.out or tempfile.mkdtemp(prefix="history-bench-")
    try:
        started = time.perf_counter()
        with ProcessPoolExecutor(options.workers) as pool:
            runs = sum(pool.map(write_lane, [(root, lane, days) for lane in LANES]))
        write_s = time.perf_counter() - started
        files = sum(1 for _ in Path(root).rglob("*.parquet"))
        print(f"wrote {runs} runs ({files} per-run files, {_size(root)}) in {write_s:.1f} s")

        last = date(2015, 1, 1) + timedelta(days=days - 1)
        a = RunRef(
            f"lane_b-{(last - timedelta(days=1)).isoformat()}", Series("lane_b", SPLIT, RUNTIME, SPLIT)
        )
        b = RunRef(f"lane_b-{last.isoformat()}", Series("lane_b", SPLIT, RUNTIME, SPLIT))
        assert len(trend_duckdb(root)) == days and diff_duckdb(root, a, b) == diff_pandas(root, a, b)
        rows: dict[str, list[Callable[[], object]]] = {
            "trend (1 metric, 1 lane)": [lambda: trend_duckdb(root), lambda: trend_pandas(root)],
            "diff of two runs": [lambda: diff_duckdb(root, a, b), lambda: diff_pandas(root, a, b)],
        }
        before = {name: [timed(f) for f in fs] for name, fs in rows.items()}
        started = time.perf_counter()
        compact(root, today=datetime(2100, 1, 1, tzinfo=UTC))
        compact_s = time.perf_counter() - started
        files_after = sum(1 for _ in Path(root).rglob("*.parquet"))
        print(f"compacted into {files_after} files ({_size(root)}) in {compact_s:.1f} s")
        assert len(trend_duckdb(root)) == days and diff_duckdb(root, a, b) == diff_pandas(root, a, b)
        after = {name: [timed(f) for f in fs] for name, fs in rows.items()}

        header = f"{'query':<26}{'duckdb per-run':>16}{'duckdb compacted':>18}{'pandas per-run':>16}{'pandas compacted':>18}"
        print(header)
        print("-" * len(header))
        for name in rows:
            (d0, p0), (d1, p1) = before[name], after[name]
            print(f"{name:<26}{d0:>15.3f}s{d1:>17.3f}s{p0:>15.3f}s{p1:>17.3f}s")
    finally:
        if not options.out:
            shutil.rmtree(root, ignore_errors=True)


def _size(root: str) -> str:
    total = sum(p.stat().st_size for p in Path(root).rglob("*.parquet"))
    return f"{total / 1e6:.0f} MB"


if __name__ == "__main__":
    main()
