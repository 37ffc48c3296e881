"""Paired comparison speed: ``compare`` of two committed runs of ``--cases`` cases; a rate over
turns; and what keeping turn verdicts costs history.

Writes two runs of one series (``--cases`` cases × ``--predicates`` predicates each, about 3%
of verdicts flipped between them; ``--samples`` samples per case) through the real store,
then times (best of 3, a fresh DuckDB connection each time) what ``eval-pipeline compare
--run A --run B --json`` computes: :func:`eval_pipeline.history.comparison.compare_runs` with
``--resamples`` bootstrap resamples per rate (its document built too), and apart from it the
paired statistics alone on one rate's per-case counts.

Then the same for a rate over turns: two runs of ``--turn-cases`` cases × ``--turns`` turns
of turn verdicts (about 3% flipped), compared paired on (case, sample, turn), clustered by case.

Then the bytes: one real lane run (the thread-coherence lane's public split, reference
runtime) repeated under fresh case ids to ``--size-turns`` turns, its stage files written in
case batches as a run writes them, and the history files of that run: ``turn_verdicts`` (what
history keeps), next to the transcripts and case predicates it keeps anyway and to the whole
turn predicates table (what keeping them with code and evidence would cost).

Run with ``python benchmarks/paired.py [--cases 100000] [--resamples 10000] [--samples 1]
[--turn-cases 10000] [--turns 10] [--size-turns 1000000]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from history import timed  # benchmarks/history.py: best of 3 wall times

from eval_pipeline.core.series import Series
from eval_pipeline.history.comparison import compare_runs
from eval_pipeline.history.runs import RunRef
from eval_pipeline.history.store import append_run, commit_run
from eval_pipeline.history.views import connect
from eval_pipeline.lanes import find_lane
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.metrics.paired import paired_figures
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.tables.columns import CASE_PREDICATES, SCHEMAS, TRANSCRIPTS, TURN_PREDICATES
from eval_pipeline.tables.stage_files import StageFile, StageWriter

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--cases 1000 --resamples 200 --turn-cases 1000 --size-turns 20000": [
        r"^compare_runs, 4 rates, flips and document: [0-9.]+ s$",
        r"^compare_runs, the rate over turns and document: [0-9.]+ s$",
        r"^turn_verdicts adds [0-9.]+% to the run's transcripts and case predicates",
    ]
}

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


def store_runs(root: str, runs: Mapping[str, Mapping[str, pd.DataFrame]]) -> list[RunRef]:
    """Append and commit each run's tables (by run id) through the real store."""
    refs = []
    for run_id, tables in runs.items():
        for table, df in tables.items():
            contract = df.reindex(columns=SCHEMAS[table].names)
            append_run(root, table, contract, lane=LANE, date=DAY, run_id=run_id)
        manifest = pd.DataFrame([{"run_id": run_id, **SERIES}])
        commit_run(root, manifest, lane=LANE, date=DAY, run_id=run_id)
        refs.append(RunRef(run_id, Series(LANE, SPLIT, RUNTIME, SPLIT), cases_sha256="0" * 64))
    return refs


def turn_run_tables(run_id: str, cases: int, turns: int, passed: np.ndarray) -> dict[str, pd.DataFrame]:
    """One run's metrics, case predicates (none) and turn verdicts of one rate over turns."""
    turn_verdicts = pd.DataFrame(
        {
            "case_id": np.repeat([f"case_{i:06d}" for i in range(cases)], turns),
            "turn_index": np.tile(np.arange(turns, dtype=np.int32), cases),
            "predicate": "turn_predicate",
            "passed": passed,
            "sample_index": 0,
        }
    ).assign(run_id=run_id, **SERIES)
    held = float(passed.sum())
    metrics = pd.DataFrame(
        [
            {
                "metric": "turn_predicate_rate",
                "value": held / len(passed),
                "numerator": held,
                "denominator": float(len(passed)),
                "threshold_op": ">=",
                "threshold": 0.9,
                "severity": "WARN",
                "passed": held / len(passed) >= 0.9,
            }
        ]
    ).assign(
        run_id=run_id,
        **SERIES,
        partition_date=DAY,
        started_at=pd.Timestamp(datetime.now(UTC)),
        cases_sha256="0" * 64,
    )
    empty = pd.DataFrame(columns=SCHEMAS["case_predicates"].names)
    return {"metrics": metrics, "case_predicates": empty, "turn_verdicts": turn_verdicts}


def turn_rate_comparison(cases: int, turns: int, resamples: int) -> None:
    root = tempfile.mkdtemp(prefix="paired-turns-bench-")
    rng = np.random.default_rng(11)
    before = rng.random(cases * turns) > 0.1
    after = np.where(rng.random(cases * turns) < 0.03, ~before, before)
    try:
        refs = store_runs(
            root,
            {
                "run-a": turn_run_tables("run-a", cases, turns, before),
                "run-b": turn_run_tables("run-b", cases, turns, after),
            },
        )
        rows = {"turn_predicate_rate": MetricRows(frozenset({"turn_predicate"}), over="turns")}

        def compare() -> str:
            with connect(root) as con:
                result = compare_runs(con, refs[0], refs[1], rows, resamples=resamples)
                return str(result.document()["metrics"][0]["method"])

        method = compare()
        print(
            f"two runs of {cases:,} cases × {turns} turns, one rate over turns ({method}), "
            f"{resamples:,} resamples"
        )
        print(f"compare_runs, the rate over turns and document: {timed(compare):.3f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def stage_files(folder: Path, turns: int) -> tuple[dict[str, StageFile], int]:
    """A real lane run repeated under fresh case ids to about ``turns`` turns, as stage files of
    case batches (about 20,000 turns each); and the turns written. Each copy's prompts and
    surfaces are the run's words shuffled, so copies do not compress into one another (a real
    run's texts differ from case to case); evidence is repeated as it is, so the whole turn
    predicates table's figure is a lower bound."""
    run = evaluate_lane(find_lane("conversational_thread_coherence"), SPLIT, build_runtime("reference"))
    keys = {"run_id": "run-size", **SERIES}
    tables = {
        "transcripts": (TRANSCRIPTS, run.transcripts),
        "turn_predicates": (TURN_PREDICATES, run.turn_predicates),
        "case_predicates": (CASE_PREDICATES, run.case_predicates),
    }
    copies = max(1, round(turns / len(run.transcripts)))
    per_batch = max(1, 20_000 // len(run.transcripts))
    rng = np.random.default_rng(5)
    files = {}
    for name, (schema, rows) in tables.items():
        lane_rows = pa.Table.from_pandas(
            rows.assign(**keys)[schema.names], schema=schema, preserve_index=False
        )
        texts = {
            column: [str(text).split() for text in rows[column].fillna("")]
            for column in ("prompt", "surface")
            if column in schema.names
        }
        with StageWriter(schema, folder) as writer:
            for first in range(0, copies, per_batch):
                parts = []
                for copy in range(first, min(first + per_batch, copies)):
                    part = lane_rows.set_column(
                        schema.get_field_index("case_id"),
                        "case_id",
                        pc.binary_join_element_wise(
                            lane_rows.column("case_id"), pa.scalar(f"{copy:07d}"), "_"
                        ),
                    )
                    for column, words in texts.items():
                        shuffled = [" ".join(rng.permutation(w)) for w in words]
                        part = part.set_column(schema.get_field_index(column), column, pa.array(shuffled))
                    parts.append(part)
                writer.write_table(pa.concat_tables(parts))
            files[name] = writer.finish()
    return files, copies * len(run.transcripts)


def history_bytes(turns: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="paired-size-bench-"))
    root = str(folder / "history")
    try:
        files, written = stage_files(folder, turns)
        stored = {
            table: append_run(root, table, files[source], lane=LANE, date=DAY, run_id="run-size")
            for table, source in (
                ("transcripts", "transcripts"),
                ("case_predicates", "case_predicates"),
                ("turn_verdicts", "turn_predicates"),
            )
        }
        size = {table: os.path.getsize(str(path)) for table, path in stored.items()}
        whole = files["turn_predicates"].path.stat().st_size
        kept = size["transcripts"] + size["case_predicates"]
        rows = files["turn_predicates"].row_count
        print(f"history bytes of one run of {written:,} turns ({rows:,} turn predicate rows):")
        for table, bytes_ in size.items():
            print(f"  {table:<16} {bytes_ / 1e6:9.1f} MB")
        print(f"  turn_predicates  {whole / 1e6:9.1f} MB  (the whole table, code and evidence: not stored)")
        print(
            f"turn_verdicts adds {size['turn_verdicts'] / kept:.1%} to the run's transcripts and case "
            f"predicates ({size['turn_verdicts'] / rows:.2f} bytes a row); the whole table would add "
            f"{whole / kept:.1%}"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--predicates", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--turn-cases", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--size-turns", type=int, default=1_000_000, help="0: leave the bytes out")
    options = parser.parse_args()
    root = tempfile.mkdtemp(prefix="paired-bench-")
    rng = np.random.default_rng(7)
    rows = options.cases * options.predicates * options.samples
    before = rng.random(rows) > 0.1
    after = np.where(rng.random(rows) < 0.03, ~before, before)
    try:
        refs = store_runs(
            root,
            {
                run_id: run_tables(run_id, options.cases, options.predicates, options.samples, passed)
                for run_id, passed in (("run-a", before), ("run-b", after))
            },
        )
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
    turn_rate_comparison(options.turn_cases, options.turns, options.resamples)
    if options.size_turns:
        history_bytes(options.size_turns)


if __name__ == "__main__":
    main()
