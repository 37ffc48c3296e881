"""Stage 2 of a framework lane: its runner run over the split's cases in a child process
(:mod:`eval_pipeline.frameworks`), what it returned written as the transcripts (laid out by
:func:`eval_pipeline.lanes.kinds.framework_runner.transcript_rows`), in the cases' batches.
The runner's report metrics are kept in the file as a note (what ``value`` metrics read)."""

from __future__ import annotations

import json
from pathlib import Path

from eval_pipeline.frameworks.process import RunnerOutcome, run_runner
from eval_pipeline.lanes import LaneSpec
from eval_pipeline.lanes.kinds.framework_runner import REPORT_NOTE, transcript_rows
from eval_pipeline.tables import TRANSCRIPTS, StageFile, StageWriter, column_values, frame, lane_columns


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


def runner_metadata(outcome: RunnerOutcome) -> dict[str, object]:
    """What the transcripts step says of a runner run: its wall time, failure, and the metrics
    it reported that are not numbers (lists, objects: kept as the step's metadata)."""
    kept = {
        name: value
        for name, value in outcome.metrics.items()
        if not (value is None or isinstance(value, bool | int | float | str))
    }
    return {
        "runner_seconds": round(outcome.seconds, 3),
        "runner_failure": outcome.failure or "",
        "runner_metrics": kept,
        "runner_scalars": {k: v for k, v in outcome.metrics.items() if k not in kept},
    }


