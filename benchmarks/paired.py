"""Paired comparison speed: ``compare`` of two committed runs of ``--cases`` cases.

Writes two runs of one series (``--cases`` cases × ``--predicates`` predicates each, about 3%
of verdicts flipped between them; ``--samples`` samples per case) through the real store,
then times (best of 3, a fresh DuckDB connection each time) what ``eval-pipeline compare
--run A --run B --json`` computes: :func:`eval_pipeline.history.comparison.compare_runs` with
``--resamples`` bootstrap resamples per rate (its document built too), and apart from it the
paired statistics alone on one rate's per-case counts. Run with
``python benchmarks/paired.py [--cases 100000] [--resamples 10000] [--samples 1]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from datetime import UTC, datetime

import numpy as np
import pandas as pd
from history import timed  # benchmarks/history.py: best of 3 wall times

from eval_pipeline.history.comparison import compare_runs
from eval_pipeline.history.runs import RunRef
from eval_pipeline.history.store import append_run, commit_run
from eval_pipeline.history.views import connect
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.paired import paired_figures
from eval_pipeline.tables import SCHEMAS

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {"--cases 1000 --resamples 200": [r"^compare_runs, 4 rates, flips and document: [0-9.]+ s$"]}

LANE, SPLIT, RUNTIME, DAY = "bench_lane", "public", "reference", "2026-12-01"
SERIES = {"lane": LANE, "split": SPLIT, "runtime": RUNTIME, "case_set": SPLIT}


def run_tables(
    run_id: str, cases: int, predicates: int, samples: int, passed: np.ndarray
) -> dict[str, pd.DataFrame]:
    """One run's metrics and case predicates (``passed``: one verdict per row)."""
    names = [f"predicate_{i}" for i in range(predicates)]
    rows = cases * predicates * samples
    case_predicates = pd.DataFrame(
        {
            "case_id": np.repeat([f"case_{i:06d}" for i in range(cases)], predicates * samples),
            "predicate": np.tile(np.repeat(names, samples), cases),
            "sample_index": np.tile(np.arange(samples, dtype=np.int32), cases * predicates),
            "passed": passed,
            "severity": "hard",
            "code": np.where(passed, "ok", "failed"),
        }
    ).assign(run_id=run_id, **SERIES)
    held = passed.reshape(cases, predicates, samples).sum(axis=(0, 2))
    metrics = pd.DataFrame(
        {
            "metric": [f"{n}_rate" for n in names],
            "value": held / (cases * samples),
            "numerator": held.astype(float),
            "denominator": float(cases * samples),
            "threshold_op": ">=",
            "threshold": 0.9,
            "severity": "WARN",
            "passed": held / (cases * samples) >= 0.9,
        }
    ).assign(
        run_id=run_id,
        **SERIES,
        partition_date=DAY,
        started_at=pd.Timestamp(datetime.now(UTC)),
        cases_sha256="0" * 64,
    )
    assert len(case_predicates) == rows
    return {"metrics": metrics, "case_predicates": case_predicates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--predicates", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--resamples", type=int, default=10_000)
    options = parser.parse_args()
    root = tempfile.mkdtemp(prefix="paired-bench-")
    rng = np.random.default_rng(7)
    rows = options.cases * options.predicates * options.samples
    before = rng.random(rows) > 0.1
    after = np.where(rng.random(rows) < 0.03, ~before, before)
    refs = []
    try:
        for run_id, passed in (("run-a", before), ("run-b", after)):
            for table, df in run_tables(
                run_id, options.cases, options.predicates, options.samples, passed
            ).items():
                contract = df.reindex(columns=SCHEMAS[table].names)
                append_run(root, table, contract, lane=LANE, date=DAY, run_id=run_id)
            manifest = pd.DataFrame([{"run_id": run_id, **SERIES}])
            commit_run(root, manifest, lane=LANE, date=DAY, run_id=run_id)
            refs.append(RunRef(run_id, LANE, SPLIT, RUNTIME, SPLIT, cases_sha256="0" * 64))
        metric_rows = {
            f"predicate_{i}_rate": MetricRows(frozenset({f"predicate_{i}"}))
            for i in range(options.predicates)
        }

        def compare() -> int:
            with connect(root) as con:
                result = compare_runs(con, refs[0], refs[1], metric_rows, resamples=options.resamples)
                return len(result.document()["flips"])

        flips = compare()
        ones = np.full(options.cases, options.samples, dtype=np.int64)
        first = before.reshape(options.cases, options.predicates, options.samples)[:, 0, :].sum(axis=1)
        second = after.reshape(options.cases, options.predicates, options.samples)[:, 0, :].sum(axis=1)
        print(
            f"two runs of {options.cases:,} cases × {options.predicates} predicates × {options.samples} "
            f"sample(s), {flips:,} flipped case predicates, {options.resamples:,} resamples per rate"
        )
        print(f"compare_runs, {options.predicates} rates, flips and document: {timed(compare):.3f} s")
        stats = timed(lambda: paired_figures(first, ones, second, ones, resamples=options.resamples))
        print(f"paired statistics alone, one rate:              {stats:.3f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
