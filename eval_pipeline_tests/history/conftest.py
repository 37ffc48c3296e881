"""A real history with known flips, written through the real store.

The fluency lane's public split is evaluated once with the reference runtime and once with
glosses off. The series ``candidate`` stands for a runtime whose behaviour changed from
night to night (a deploy turned glosses off, then back on, then off): its four runs
alternate gloss / no-gloss, so the nine pack_definition cases flip ``no_provenance_only``,
``no_dotted_inventory`` and ``post_gloss_predicates`` at every run. The ``reference``
series has two identical runs (nothing flips). Every run is committed (its manifest written
after its tables) unless a test says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from eval_pipeline.history.store import append_run, commit_run
from eval_pipeline.lanes import find_lane
from eval_pipeline.metrics.usage import USAGE_METRICS
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.tables.columns import (
    CASE_PREDICATES,
    METRICS,
    RUN_MANIFESTS,
    TRANSCRIPTS,
    TURN_VERDICTS,
    frame,
    nullable_types,
    to_arrow,
)

LANE = "deterministic_fluency"
SPLIT = "public"
FLIPPING_CASES = (
    "fluency_belief_004",
    "fluency_doubt_002",
    "fluency_evidence_007",
    "fluency_justice_009",
    "fluency_knowledge_003",
    "fluency_memory_006",
    "fluency_reason_008",
    "fluency_truth_001",
    "fluency_wisdom_005",
)
FLIPPING_PREDICATES = ("no_dotted_inventory", "no_provenance_only", "post_gloss_predicates")


CASES_SHA256 = "0" * 64


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    runtime: str
    date: str
    glossed: bool
    case_set: str = SPLIT
    cases_sha256: str = CASES_SHA256
    hour: int = 2
    split: str = SPLIT
    lane: str = LANE

    @property
    def started_at(self) -> pd.Timestamp:
        return pd.Timestamp(datetime.fromisoformat(self.date).replace(hour=self.hour, tzinfo=UTC))


# Metric rows a run of the fixture lane stores: its own ten and every lane's usage metrics.
LANE_METRICS = 10
METRICS_PER_RUN = LANE_METRICS + len(USAGE_METRICS)

# (run_id, runtime label, day, glosses on?)
CANDIDATE_RUNS = (
    StoredRun("run-c1", "candidate", "2024-03-01", True),
    StoredRun("run-c2", "candidate", "2024-03-02", False),
    StoredRun("run-c3", "candidate", "2024-03-03", True),
    StoredRun("run-c4", "candidate", "2024-04-01", False),
)
REFERENCE_RUNS = (
    StoredRun("run-r1", "reference", "2024-03-01", True),
    StoredRun("run-r2", "reference", "2024-03-02", True),
)


@pytest.fixture(scope="session")
def lane_runs() -> dict[bool, LaneRun]:
    """The public split evaluated with glosses on (True) and off (False)."""
    spec = find_lane(LANE)
    return {
        True: evaluate_lane(spec, SPLIT, build_runtime("reference")),
        False: evaluate_lane(spec, SPLIT, build_runtime("reference:no-gloss")),
    }


def run_tables(
    run: LaneRun, stored: StoredRun, *, keep_transcripts: bool = True, turn_verdicts: bool = True
) -> dict[str, pd.DataFrame]:
    """One lane run's data tables as the Dagster side stores them, in append order; without
    ``turn_verdicts``, as history stored them before it kept turn verdicts."""
    keys = run_keys(stored)
    metrics = run.metrics.copy()
    metrics["partition_date"] = stored.date
    metrics["started_at"] = stored.started_at
    metrics["cases_sha256"] = stored.cases_sha256
    metrics["pipeline_version"] = "test"
    tables = {"metrics": (metrics, METRICS), "case_predicates": (run.case_predicates, CASE_PREDICATES)}
    if turn_verdicts:
        tables["turn_verdicts"] = (run.turn_predicates, TURN_VERDICTS)
    if keep_transcripts:
        tables["transcripts"] = (run.transcripts, TRANSCRIPTS)
    return {
        name: to_arrow(schema, df, **keys).to_pandas(types_mapper=nullable_types)
        for name, (df, schema) in tables.items()
    }


def run_keys(stored: StoredRun) -> dict[str, str]:
    return {
        "run_id": stored.run_id,
        "lane": stored.lane,
        "split": stored.split,
        "runtime": stored.runtime,
        "case_set": stored.case_set,
    }


def manifest(stored: StoredRun) -> pd.DataFrame:
    return frame(
        RUN_MANIFESTS,
        [
            {
                "runtime_spec": "reference" if stored.glossed else "reference:no-gloss",
                "partition_date": stored.date,
                "started_at": stored.started_at.to_pydatetime(),
                "cases_sha256": stored.cases_sha256,
                "pipeline_version": "test",
                "dagster_job": f"{stored.lane}_job",
            }
        ],
        **run_keys(stored),
    )


def record_run(
    root: str,
    run: LaneRun,
    stored: StoredRun,
    *,
    keep_transcripts: bool = True,
    turn_verdicts: bool = True,
    commit: bool = True,
) -> None:
    """Append one lane run's tables to history, then commit it, as the Dagster side does."""
    tables = run_tables(run, stored, keep_transcripts=keep_transcripts, turn_verdicts=turn_verdicts)
    for table, df in tables.items():
        append_run(root, table, df, lane=stored.lane, date=stored.date, run_id=stored.run_id)
    if commit:
        commit_run(root, manifest(stored), lane=stored.lane, date=stored.date, run_id=stored.run_id)


@pytest.fixture
def history(history_root: Path, lane_runs: dict[bool, LaneRun]) -> str:
    """A history root holding every run of CANDIDATE_RUNS and REFERENCE_RUNS."""
    root = str(history_root)
    for stored in (*CANDIDATE_RUNS, *REFERENCE_RUNS):
        record_run(root, lane_runs[stored.glossed], stored)
    return root
