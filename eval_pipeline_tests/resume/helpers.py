"""Shared pieces of the resume and budget tests: long threads, the CLI as a child process, the
request count at a real server, history's tables of one run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds

from eval_pipeline.lanes.registry import discover_lanes
from eval_pipeline.run.journal import read_journal
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline.runtimes.serve import ReferenceServer
from eval_pipeline_tests.metric_tables import untimed

EXECUTABLE = Path(sys.executable).parent / "eval-pipeline"
LANE = "conversational_thread_coherence"
SUBJECTS = [
    "truth",
    "doubt",
    "mind",
    "attention",
    "habit",
    "error",
    "knowledge",
    "belief",
    "memory",
    "language",
]
TURNS_PER_THREAD = 10
# The runs killed at about half their turns and resumed (CLI and Dagster): threads, sessions at once.
KILLED_THREADS = 200
KILLED_CONCURRENCY = 16
# Both resume tests compare with one uninterrupted run (conftest.py), made once on their worker.
RESUME_GROUP = "resume"

# What must equal between a resumed run and an uninterrupted one (latency, raw and the run id
# aside), of each table history keeps.
TABLE_COLUMNS = {
    "transcripts": [
        "case_id",
        "sample_index",
        "turn_index",
        "role",
        "prompt",
        "surface",
        "grounding_source",
        "error",
        "seed",
    ],
    "case_predicates": [
        "case_id",
        "sample_index",
        "predicate",
        "passed",
        "severity",
        "code",
        "message",
        "evidence",
    ],
    "metrics": ["metric", "value", "numerator", "denominator", "verdict"],
}


def write_threads(path: Path, count: int) -> Path:
    """``count`` ten-turn threads, each case its own session."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            subjects = [SUBJECTS[(i + j) % len(SUBJECTS)] for j in range(TURNS_PER_THREAD)]
            turns = [{"prompt": f"What is {s}?", "subject_lemma": s} for s in subjects]
            out.write(json.dumps({"id": f"thread_{i:03d}", "turns": turns}) + "\n")
    return path


def requests_served(server: ReferenceServer) -> int:
    """Chat-completion requests the server has answered so far (every arrival counts once)."""
    return sum(server.fault_counts.values())


def served_options() -> dict[str, object]:
    """The ``openai:`` options of the served reference (its extra fields are read where it sends them)."""
    return {"model": "reference"}


def uninterrupted_run(
    server: ReferenceServer, split: str | None, cases: Path | None, concurrency: int
) -> LaneRun:
    """The lane over ``cases`` (else ``split``'s) against the server in one uninterrupted piece
    (no Dagster, no history): what a resumed run's tables must equal."""
    spec = next(s for s in discover_lanes() if s.name == LANE)
    runtime = build_runtime(f"openai:{server.base_url}", served_options())
    try:
        return evaluate_lane(
            spec, split or spec.nightly_splits[0], runtime, cases_path=cases, concurrency=concurrency
        )
    finally:
        runtime.close()


def openai_arguments(server: ReferenceServer) -> list[str]:
    return [
        "--runtime",
        f"openai:{server.base_url}",
        *(
            part
            for name, value in served_options().items()
            for part in ("-o", f"{name}={json.dumps(value) if not isinstance(value, str) else value}")
        ),
    ]


def run_cli(
    arguments: list[str], env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXECUTABLE), "run", *arguments],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def kill_when(
    arguments: list[str],
    ready: Callable[[], bool],
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.Popen[str]:
    """Start ``eval-pipeline run`` and SIGKILL it as soon as ``ready()`` holds."""
    child = subprocess.Popen(
        [str(EXECUTABLE), "run", *arguments],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout
    while not ready():
        if child.poll() is not None:
            raise AssertionError(
                f"the run ended before it was killed: {child.stderr.read()[-3000:] if child.stderr else ''}"
            )
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError("the run never got far enough to be killed")
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    return child


def journals(state: Path) -> list[Path]:
    return sorted((state / "dagster_home" / "storage" / "journal").rglob("*.journal"))


def journaled_sessions(state: Path) -> int:
    """Sessions the series' journals hold that check."""
    return sum(len(read_journal(path).sessions) for path in journals(state))


def history_table(root: Path, table: str) -> pd.DataFrame:
    """Every row of one history table (all runs)."""
    return ds.dataset(str(root / table), format="parquet", partitioning="hive").to_table().to_pandas()


def committed_runs(root: Path) -> list[str]:
    return sorted(set(history_table(root, "run_manifests")["run_id"]))


def comparable(rows: pd.DataFrame, table: str) -> pd.DataFrame:
    """A table's rows without the columns a re-run legitimately changes, in one order."""
    columns = TABLE_COLUMNS[table]
    if table == "metrics":  # the runtime's timings differ from run to run
        rows = untimed(rows)
    return rows[columns].astype(str).sort_values(columns).reset_index(drop=True)
