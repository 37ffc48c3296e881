"""A lane run's outcome (what the CLI and the sensor read back from Dagster) as a :class:`LaneRun`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.notify.events import FAILING_CASES_SHOWN, LaneRun, first_cases

if TYPE_CHECKING:
    from eval_pipeline.dagster_wiring.launch import LaneOutcome


def lane_run(outcome: LaneOutcome, night: str) -> LaneRun:
    """The outcome's series, checks and first failing cases (read batch by batch: a big run's
    table is never read whole for a message)."""
    failing = None if outcome.void else outcome.first_failing(FAILING_CASES_SHOWN)
    return LaneRun(
        series=outcome.series,
        run_id=outcome.run_id,
        night=night,
        checks=tuple(outcome.checks),
        failing_cases=() if failing is None else first_cases(failing.rows.to_dict("records")),
        failing_total=0 if failing is None else failing.results,
        measurement_note=outcome.measurement_note,
    )
