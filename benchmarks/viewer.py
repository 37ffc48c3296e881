"""How fast ``eval-pipeline view`` answers on a big history: a lane's grid of 10,000 cases × 4
runtime targets, and the run page of a run of 1,000,000 turns.

Writes the history synthetically, straight into the store's layout with pyarrow (one Parquet
file per run per table, row groups of 20,000 rows as a big run's stage files are; each run's
metrics judged and built as the pipeline builds them, ``history.metrics_table``; then the
run's manifest through ``commit_run``), starts ``eval-pipeline view`` on it as a user does
(``--starts`` times) and prints the time until each start served its first page, then each
page's time over HTTP (first answer and best of ``--repeat``; each request opens its own
connection to the history views), then how long ``eval-pipeline report`` takes to write the
same history's static pages. Run with
``python benchmarks/viewer.py [--cases 10000] [--big-turns 1000000] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from history import metrics_table  # benchmarks/history.py: a metrics table as the pipeline builds it

from eval_pipeline.history.store import append_run, commit_run, run_file
from eval_pipeline.lanes.spec import ThresholdSpec
from eval_pipeline.metrics.scoring import ERROR_RATE, MetricValue
from eval_pipeline.tables.columns import JSON_TEXT, RUN_MANIFESTS, SCHEMAS, frame

# Test-suite runs (eval_pipeline_tests/test_benchmarks_run.py): arguments → lines of figures.
TINY_RUNS = {
    "--cases 20 --big-turns 200 --repeat 1 --starts 1": [
        r"^grid, every case, page 1 +[0-9.]+s +[0-9.]+s$",
        r"^report: \d+ pages written in [0-9.]+ s$",
    ]
}

LANE, BIG_LANE, SPLIT, DAY = "bench_lane", "bench_big_run", "public", "2026-11-30"
RUNTIMES = ("reference", "reference-no-gloss", "staging", "candidate")
PREDICATES = ("no_placeholder", "complete_punctuation", "no_dotted_inventory", "no_provenance_only")
ROW_GROUP = 20_000
THRESHOLDS = [
    ThresholdSpec(metric=f"{name}_rate", op=">=", value=0.99, severity=severity, reason="Benchmark floor.")
    for name, severity in zip(PREDICATES, ("ERROR", "ERROR", "WARN", "WARN"), strict=True)
]


def write_table(root: str, table: str, lane: str, run_id: str, columns: dict[str, pa.Array]) -> None:
    """One run's file of ``table``: the given columns, every other contract column null."""
    schema = SCHEMAS[table]
    rows = len(next(iter(columns.values())))
    arrays = [columns[f.name] if f.name in columns else pa.nulls(rows, f.type) for f in schema]
    path = Path(run_file(root, table, lane, DAY, run_id))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path, row_group_size=ROW_GROUP)


def write_run(
    root: str, lane: str, run_id: str, runtime: str, cases: int, turns_per_case: int, seed: int
) -> None:
    """A committed run: ``cases`` cases of ``turns_per_case`` turns, four predicates per case,
    about 5% of the case predicates failing (which, per runtime, from the seed)."""
    rng = np.random.default_rng(seed)
    case_ids = np.array([f"case_{i:07d}" for i in range(cases)])
    run = {"run_id": run_id, "lane": lane, "split": SPLIT, "runtime": runtime, "case_set": SPLIT}

    def constant(name: str, n: int) -> pa.Array:
        return pa.array(np.full(n, run[name]), pa.string())

    turns = cases * turns_per_case
    errors = rng.random(turns) < 0.001
    turn_case = np.repeat(case_ids, turns_per_case)
    turn_index = np.tile(np.arange(turns_per_case, dtype=np.int32), cases)
    write_table(
        root,
        "transcripts",
        lane,
        run_id,
        {
            **{name: constant(name, turns) for name in run},
            "case_id": pa.array(turn_case),
            "turn_index": pa.array(turn_index),
            "role": pa.array(np.full(turns, "turn")),
            "prompt": pa.array(np.char.add("What about topic ", turn_index.astype(str))),
            "surface": pa.array(np.char.add(f"{runtime} answers about ", turn_case)),
            "grounding_source": pa.array(np.full(turns, "pack")),
            "latency_ms": pa.array(rng.uniform(1, 50, turns)),
            "error": pa.array(np.where(errors, "timeout after 30 s", None), pa.string()),
            "sample_index": pa.array(np.zeros(turns, dtype=np.int32)),
        },
    )
    rows = cases * len(PREDICATES)
    passed = rng.random(rows) > 0.05
    codes = np.where(passed, "ok", "dotted_inventory")
    write_table(
        root,
        "case_predicates",
        lane,
        run_id,
        {
            **{name: constant(name, rows) for name in run},
            "case_id": pa.array(np.repeat(case_ids, len(PREDICATES))),
            "predicate": pa.array(np.tile(PREDICATES, cases)),
            "passed": pa.array(passed),
            "severity": pa.array(np.tile(["hard", "hard", "report", "report"], cases)),
            "code": pa.array(codes),
            "message": pa.array(np.where(passed, "holds.", "The answer lists internal dotted paths.")),
            "evidence": pa.ExtensionArray.from_storage(JSON_TEXT, pa.array(np.full(rows, "{}"))),
            "sample_index": pa.array(np.zeros(rows, dtype=np.int32)),
        },
    )
    started = pd.Timestamp(datetime(2026, 11, 30, 2, tzinfo=UTC))
    held = {f"{p}_rate": passed[i :: len(PREDICATES)] for i, p in enumerate(PREDICATES)}
    values = [MetricValue(name, float(v.mean()), float(v.sum()), float(len(v))) for name, v in held.items()]
    faulted = int(np.count_nonzero(errors))
    values.append(MetricValue(ERROR_RATE, faulted / turns, float(faulted), float(turns)))
    metrics = metrics_table(values, THRESHOLDS, **run, partition_date=DAY, started_at=started.to_pydatetime())
    append_run(root, "metrics", metrics, lane=lane, date=DAY, run_id=run_id)
    manifest = frame(
        RUN_MANIFESTS,
        [{"runtime_spec": runtime, "partition_date": DAY, "started_at": started.to_pydatetime()}],
        **run,
    )
    commit_run(root, manifest, lane=lane, date=DAY, run_id=run_id)


def get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
        assert response.status == 200, (url, response.status)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", type=int, default=10_000, help="cases per runtime target in the grid's lane"
    )
    parser.add_argument("--big-turns", type=int, default=1_000_000, help="turns of the big run (10 per case)")
    parser.add_argument("--repeat", type=int, default=5, help="requests per page; the best is printed")
    parser.add_argument("--starts", type=int, default=3, help="times view is started (each start timed)")
    parser.add_argument("--out", help="keep the history here (default: a temporary folder, removed)")
    args = parser.parse_args()
    root = args.out or tempfile.mkdtemp(prefix="viewer-bench-")
    try:
        start = time.perf_counter()
        for index, runtime in enumerate(RUNTIMES):
            write_run(root, LANE, f"grid-{runtime}", runtime, args.cases, 3, seed=index)
        write_run(root, BIG_LANE, "big-run", "reference", args.big_turns // 10, 10, seed=99)
        print(
            f"history written in {time.perf_counter() - start:.1f} s: {args.cases:,} cases × "
            f"{len(RUNTIMES)} runtime targets (3 turns each), and a run of {args.big_turns:,} turns"
        )
        serve(root, args)
    finally:
        if not args.out:
            shutil.rmtree(root, ignore_errors=True)


def start_viewer(view: str, root: str) -> tuple[subprocess.Popen[str], str, float, float]:
    """``eval-pipeline view`` on ``root``: the process, its URL, the seconds until it printed
    that it serves and until its first page (``/``) answered."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [view, "view", "--history", root, "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", process.stdout.readline())
    assert match, "the viewer did not start"
    url = f"http://127.0.0.1:{match.group(1)}"
    serving = time.perf_counter() - start
    return process, url, serving, get(url + "/") + serving


def serve(root: str, args: argparse.Namespace) -> None:
    view = str(Path(sys.executable).parent / "eval-pipeline")
    process: subprocess.Popen[str] | None = None
    for attempt in range(1, args.starts + 1):  # the last start serves the pages timed below
        if process is not None:
            process.terminate()
            process.wait(timeout=10)
        process, url, serving, first_page = start_viewer(view, root)
        print(
            f"start {attempt}: serving after {serving:.2f} s, first page (/) {first_page:.2f} s after start"
        )
    assert process is not None
    try:
        big_case = f"case_{args.big_turns // 20:07d}"
        grid = f"/lanes/{LANE}/grid?split={SPLIT}"
        pages = {
            "grid, every case, page 1": grid,
            "grid, page 100": grid + "&page=100",
            "grid, failing anywhere": grid + "&filter=failing",
            "grid, runtimes disagree": grid + "&filter=disagree",
            "grid, search 'case_0009'": grid + "&q=case_0009",
            "grid, search a surface's words": grid + "&q=" + quote("staging answers about case_00042"),
            "run page, 1M turns, page 1": "/runs/big-run",
            "run page, 1M turns, page 200": "/runs/big-run?page=200",
            "case page in the 1M-turn run": f"/runs/big-run/cases/{big_case}",
            "every series (/)": "/",
        }
        print(f"{'page':<34} {'first':>8} {'best':>8}")
        for name, path in pages.items():
            times = [get(url + path) for _ in range(args.repeat)]
            print(f"{name:<34} {times[0]:>7.3f}s {min(times):>7.3f}s")
    finally:
        process.terminate()
        process.wait(timeout=10)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run([view, "report", "--history", root, "--out", out], check=True, capture_output=True)
        files = sum(1 for _ in Path(out).rglob("*.html"))
        print(f"report: {files} pages written in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
