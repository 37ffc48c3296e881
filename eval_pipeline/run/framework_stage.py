"""Stage 2 of a framework lane: its runner run over the split's cases in a child process
(:mod:`eval_pipeline.frameworks`), what it returned written as the transcripts (laid out by
:func:`eval_pipeline.lanes.kinds.framework_runner.transcript_rows`), in the cases' batches.
The runner's report metrics are kept in the file as a note (what ``value`` metrics read)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.frameworks.process import RunnerOutcome, run_runner
from eval_pipeline.lanes import LaneSpec
from eval_pipeline.lanes.kinds.framework_runner import REPORT_NOTE, transcript_rows
from eval_pipeline.tables import TRANSCRIPTS, StageFile, StageWriter, column_values, frame, lane_columns


@dataclass(frozen=True)
class RunnerMetadata:
    """A runner run as its transcripts step shows it."""

    seconds: float
    failure: str
    other: dict[str, Any]
    scalars: dict[str, Any]


def run_framework(
    spec: LaneSpec,
    cases: StageFile,
    run_columns: dict[str, str] | None = None,
    folder: str | Path | None = None,
    deadline_s: float | None = None,
) -> tuple[StageFile, RunnerOutcome]:
    """The transcripts of one run of the lane's runner over ``cases``, and what the run gave
    (its metrics, its failure); a failed run's transcripts hold the failure on every case."""
    if spec.runner is None:
        raise ValueError(f"lane {spec.name!r} names no framework runner")
    read = cases.read(["case_id", "case_json"])
    records = [json.loads(text) for text in column_values(read, "case_json")]
    outcome = run_runner(spec.runner, spec.folder, records, deadline_s)
    table = frame(TRANSCRIPTS, transcript_rows(spec.runner, records, outcome.details, outcome.failure))
    rows = table[lane_columns(TRANSCRIPTS)]
    with StageWriter(TRANSCRIPTS, folder) as writer:
        writer.note(REPORT_NOTE, json.dumps(outcome.metrics, ensure_ascii=False, sort_keys=True))
        for index in range(cases.batch_count):
            ids = set(column_values(cases.batch(index, ["case_id"]), "case_id"))
            writer.write(rows[rows["case_id"].isin(ids)] if ids else rows.iloc[0:0], **(run_columns or {}))
        return writer.finish(), outcome


def runner_metadata(outcome: RunnerOutcome) -> RunnerMetadata:
    """What the transcripts step says of a runner run: its wall time, failure, and its metrics,
    the numbers and texts apart from the rest (lists, objects: shown only as the step's metadata)."""
    scalar = (bool, int, float, str)
    return RunnerMetadata(
        seconds=round(outcome.seconds, 3),
        failure=outcome.failure or "",
        other={k: v for k, v in outcome.metrics.items() if not (v is None or isinstance(v, scalar))},
        scalars={k: v for k, v in outcome.metrics.items() if v is None or isinstance(v, scalar)},
    )
