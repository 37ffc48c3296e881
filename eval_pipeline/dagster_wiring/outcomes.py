"""A lane run's outcome read back from Dagster: what the run's steps stored (the committed
outcome, the stage files, the metrics table) and how it broke, if it did; for a run this process
executed (:mod:`eval_pipeline.dagster_wiring.launch`) or one the instance holds (the sensor)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from eval_pipeline.core import OfSeries, Series
from eval_pipeline.dagster_wiring.assets import JOURNAL_METADATA, OUTCOME_METADATA
from eval_pipeline.dagster_wiring.io_manager import PATH_METADATA
from eval_pipeline.dagster_wiring.tags import SERIES_TAG
from eval_pipeline.lanes import LaneSpec
from eval_pipeline.metrics import FLAKY_READS, flaky_within_run, samples_in
from eval_pipeline.outcome import MEASUREMENT_CHECK, CheckOutcome, RunOutcome
from eval_pipeline.runtimes.budget import BudgetReached
from eval_pipeline.tables import StageFile, faulted, read_table


@dataclass
class LaneOutcome(OfSeries):
    """What one lane partition's run produced, read back from Dagster."""

    series: Series
    run_id: str
    success: bool
    failure: str | None = None
    failure_kind: str | None = None
    # What the run found, as history stored it (None: the run broke before it was committed).
    outcome: RunOutcome | None = None
    metrics: pd.DataFrame | None = None
    # The run's stage files (transcripts, turn_predicates, case_predicates) that it wrote. A
    # big run's tables are read only as far as a reader needs: the failing rows, the faults.
    files: dict[str, StageFile] = field(default_factory=dict)
    journal_note: str = ""  # what the transcripts step said of its journal ("resumed: 812 of 1,000 …")

    def _table(self, stage: str) -> pd.DataFrame | None:
        stored = self.files.get(stage)
        return stored.read() if stored is not None else None

    @property
    def transcripts(self) -> pd.DataFrame | None:
        """Every turn of the run (read whole: the JSON output and JUnit list them all)."""
        return self._table("transcripts")

    @property
    def turn_predicates(self) -> pd.DataFrame | None:
        return self._table("turn_predicates")

    @property
    def case_predicates(self) -> pd.DataFrame | None:
        return self._table("case_predicates")

    @property
    def turns_driven(self) -> int:
        """Every turn of every sample the run drove (its transcripts' rows, as the usage metric counts)."""
        stored = self.files.get("transcripts")
        return stored.row_count if stored is not None else 0

    def faulted_turns(self) -> pd.DataFrame | None:
        """The case and fault of every turn that faulted (None: the stage did not run)."""
        stored = self.files.get("transcripts")
        return stored.read(["case_id", "error"], where=faulted()) if stored is not None else None

    @property
    def samples(self) -> int:
        stored = self.files.get("case_predicates")
        return samples_in(stored) if stored is not None else 1

    def flaky(self) -> pd.DataFrame | None:
        """Case predicates whose samples disagree (None: the stage did not run)."""
        stored = self.files.get("case_predicates")
        return flaky_within_run(stored.batches(FLAKY_READS), self.samples) if stored is not None else None

    @property
    def checks(self) -> tuple[CheckOutcome, ...]:
        return () if self.outcome is None else self.outcome.checks

    @property
    def blocking_failures(self) -> list[CheckOutcome]:
        return [] if self.outcome is None else self.outcome.blocking_failures

    @property
    def budget_reached(self) -> bool:
        """The run stopped at its budget before every session was sent (its journal keeps the rest)."""
        return self.failure_kind == BudgetReached.__name__

    @property
    def broken(self) -> bool:
        """A stage raised: the run measured nothing and has no outcome (a budget stop is void, not broken)."""
        return self.failure is not None and not self.budget_reached

    @property
    def void(self) -> bool:
        """The run did not measure its runtime: its outcome says so, or its budget stopped it."""
        return self.budget_reached or (self.outcome is not None and self.outcome.void)

    @property
    def verdict(self) -> str:
        """``error`` (the run broke), ``void``, else its outcome's verdict."""
        if self.broken or (self.outcome is None and not self.budget_reached):
            return "error"
        return "void" if self.void or self.outcome is None else self.outcome.verdict

    @property
    def measurement_note(self) -> str:
        if self.budget_reached:  # the message, without the exception's name
            return (self.failure or "").split(f"{BudgetReached.__name__}: ", 1)[-1]
        check = None if self.outcome is None else self.outcome.check(MEASUREMENT_CHECK)
        return "" if check is None else check.description


def _root_cause(error: Any) -> tuple[str, str]:
    """(class name, message) of the innermost cause of a serialized step error."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = str(getattr(error, "message", error)).strip()
    kind = str(getattr(error, "cls_name", ""))
    # Dagster's message starts with the error's qualified class name: the kind says it already.
    return kind, re.sub(rf"^(?:[\w.]+\.)?{re.escape(kind)}: ", "", message) if kind else message


def read_outcome(spec: LaneSpec, result: dg.ExecuteInProcessResult | Any, series: Series) -> LaneOutcome:
    """A finished run's results, read back from Dagster (its check evaluations and stored tables)."""
    outcome = LaneOutcome(series, result.run_id, result.success)
    outcome.metrics = _stored_value(result, dg.AssetKey([spec.name, "metrics"]))
    journal_note = _materialized_metadata(result, dg.AssetKey([spec.name, "transcripts"]), JOURNAL_METADATA)
    outcome.journal_note = "" if journal_note is None else str(journal_note)
    for stage in ("turn_predicates", "case_predicates", "transcripts"):
        path = _stored_path(result, dg.AssetKey([spec.name, stage]))
        if path is not None:
            outcome.files[stage] = StageFile(path)
    stored = _materialized_metadata(result, dg.AssetKey([spec.name, "history"]), OUTCOME_METADATA)
    if stored is not None:  # read back as history stored it: never derived again
        outcome.outcome = RunOutcome.from_json(json.dumps(stored))
    blocked_only = bool(outcome.blocking_failures)
    failures = result.get_step_failure_events()
    if failures and not blocked_only:
        outcome.failure_kind, outcome.failure = _root_cause(failures[0].step_failure_data.error)
    elif not result.success and not blocked_only:
        # No step failed, yet the run did: the executor lost a step (a Celery worker died).
        outcome.failure_kind, outcome.failure = _run_failure(result.all_events)
    return outcome


@dataclass(frozen=True)
class StoredRunResult:
    """A finished run's events as the instance stored them, read like an execution result (for
    runs this process did not execute: the daemon's)."""

    run_id: str
    success: bool
    all_events: list[dg.DagsterEvent]

    def get_asset_check_evaluations(self) -> list[Any]:
        return [
            event.event_specific_data
            for event in self.all_events
            if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ]

    def get_step_failure_events(self) -> list[dg.DagsterEvent]:
        return [event for event in self.all_events if event.is_step_failure]


def stored_outcome(spec: LaneSpec, instance: dg.DagsterInstance, run: dg.DagsterRun) -> LaneOutcome:
    """The outcome of a lane run the instance holds, read from its stored events (its series
    from its tags), exactly as a run this process executed is read."""
    events = [entry.dagster_event for entry in instance.all_logs(run.run_id) if entry.dagster_event]
    result = StoredRunResult(run.run_id, run.status == dg.DagsterRunStatus.SUCCESS, events)
    return read_outcome(spec, result, Series.from_key(run.tags[SERIES_TAG]))


def _run_failure(events: Any) -> tuple[str, str]:
    """(class name, message) of what failed a run outside its steps: the first engine error,
    else the run's failure message."""
    for event in events:
        error = getattr(event.event_specific_data, "error", None)
        if error is not None:
            return _root_cause(error)
    for event in events:
        if event.event_type == dg.DagsterEventType.RUN_FAILURE:
            return "RunFailure", str(event.message)
    return "RunFailure", "the run failed"


def _materialized_metadata(result: dg.ExecuteInProcessResult | Any, key: dg.AssetKey, name: str) -> Any:
    """The value of metadata entry ``name`` of the run's materialization of ``key``, or None."""
    for event in result.all_events:
        if event.is_step_materialization and event.asset_key == key:
            recorded = event.step_materialization_data.materialization.metadata.get(name)
            if recorded is not None:
                return recorded.value
    return None


def _stored_path(result: dg.ExecuteInProcessResult | Any, key: dg.AssetKey) -> Path | None:
    """The Parquet file the run's materialization of ``key`` records (whichever process wrote
    it), or None: the stage did not produce output (an earlier step failed)."""
    recorded = _materialized_metadata(result, key, PATH_METADATA)
    return None if recorded is None else Path(str(recorded))


def _stored_value(result: dg.ExecuteInProcessResult | Any, key: dg.AssetKey) -> pd.DataFrame | None:
    """The stage table the run materialized for ``key``, read whole, or None."""
    path = _stored_path(result, key)
    return read_table(path) if path is not None else None
