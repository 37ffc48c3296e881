"""A lane run's outcome (what the CLI and the sensor read back from Dagster) as a :class:`LaneRun`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.notify.events import LaneRun, first_cases

if TYPE_CHECKING:
    from eval_pipeline.dagster_wiring.outcomes import LaneOutcome


def lane_run(outcome: LaneOutcome, night: str) -> LaneRun:
    """The outcome's series, checks, verdict and first failing items, as the run stored them."""
    run = None if outcome.void else outcome.outcome
    return LaneRun(
        series=outcome.series,
        run_id=outcome.run_id,
        night=night,
        checks=tuple(outcome.checks),
        failing_cases=() if run is None else first_cases(run.failing),
        failing_total=0 if run is None else run.failing_results,
        measurement_note=outcome.measurement_note,
        void=outcome.void,
        faults=() if outcome.outcome is None else outcome.outcome.faults,
    )
