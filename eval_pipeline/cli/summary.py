"""What ``run --summary-md FILE`` writes: each lane run's outcome beside its baseline, as the
CI summary (:mod:`eval_pipeline.report.ci_summary`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from eval_pipeline.history import connect
from eval_pipeline.history.previous import (
    has_runtime,
    latest_run_id,
    metric_values,
    named_run_id,
    previous_run_id,
)
from eval_pipeline.history.runs import resolve_run_id
from eval_pipeline.report import FAILING_ROWS_SHOWN, LaneSummary, MetricLine, summary_markdown

if TYPE_CHECKING:
    import duckdb

    from eval_pipeline.dagster_wiring.outcomes import LaneOutcome


def check_baseline(history_root: str, baseline: str | None) -> None:
    """``--baseline`` names a committed run, or a runtime target with committed runs (KeyError,
    bad input, before anything runs)."""
    if baseline is None:
        return
    with connect(history_root) as con:
        if not has_runtime(con, baseline):
            try:
                resolve_run_id(con, baseline)
            except KeyError as exc:
                raise KeyError(
                    f"--baseline {baseline!r}: neither a run id (or prefix) nor a runtime target with runs "
                    f"in history ({exc.args[0]})"
                ) from None


def lane_summary(
    outcome: LaneOutcome, baseline_run_id: str | None, baseline: dict[str, float | None]
) -> LaneSummary:
    checks = {c.name: c for c in outcome.checks}
    metrics: list[MetricLine] = []
    rows = [] if outcome.metrics is None else outcome.metrics.to_dict("records")
    for row in rows:
        name = str(row["metric"])
        check = checks.get(name)
        value = row["value"]
        metrics.append(
            MetricLine(
                metric=name,
                value=None if pd.isna(value) else float(value),
                baseline=baseline.get(name),
                threshold=""
                if check is None or check.threshold is None
                else f"{check.threshold} ({check.severity})",
                verdict="" if check is None else check.verdict,
            )
        )
    run = None if outcome.void else outcome.outcome
    failing = [] if run is None else run.failing[:FAILING_ROWS_SHOWN]
    notes = [f"void: {outcome.measurement_note}"] if outcome.void else []
    if outcome.failure is not None and not outcome.budget_reached:
        notes.append(f"the run failed ({outcome.failure_kind}): {outcome.failure}")
    return LaneSummary(
        title=outcome.series.label,
        run_id=outcome.run_id,
        verdict=outcome.verdict,
        metrics=metrics,
        baseline_run_id=baseline_run_id,
        failing_rows=[{**vars(item), "turn": item.where} for item in failing],
        failing_total=0 if run is None else run.failing_results,
        faults=[] if outcome.outcome is None else list(outcome.outcome.faults),
        notes=notes,
    )


def _baseline_of(con: duckdb.DuckDBPyConnection, outcome: LaneOutcome, baseline: str | None) -> str | None:
    """The run a lane run is compared with: ``baseline``'s run of the lane, or the latest run of the
    series with runtime target ``baseline`` (the same lane, split and cases), else the series'
    previous run."""
    if baseline is not None and has_runtime(con, baseline):
        return latest_run_id(con, replace(outcome.series, runtime=baseline))
    if baseline is not None:
        return named_run_id(con, baseline, outcome.lane)
    return previous_run_id(con, outcome.series, outcome.run_id)


def write_summary(
    path: Path, outcomes: Sequence[LaneOutcome], *, history_root: str, baseline: str | None
) -> None:
    """The summary of ``outcomes``, written whole or not at all (a temporary file, renamed)."""
    with connect(history_root) as con:
        lanes = []
        for outcome in outcomes:
            against = _baseline_of(con, outcome, baseline)
            values = {} if against is None else metric_values(con, against, outcome.lane)
            lanes.append(lane_summary(outcome, against, values))
    text = summary_markdown(lanes)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
