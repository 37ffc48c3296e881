"""What happened to a lane run that someone should hear about: pure functions over its outcome.

A lane run yields at most one event of each kind:

- ``void``: the run did not measure its runtime (too many turns faulted); nothing else is said;
- ``check_failed``: a threshold check failed (severity ERROR when a blocking one did, else WARN);
- ``regression``: the lane's ``no_regression`` check failed (its own verdict, read from the
  check, never re-derived);
- ``recovered``: the run passed its blocking checks and the series' previous run in history
  had failed (or was void).

A series is ``stale`` when its last run started longer ago than the lanes' freshness window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from eval_pipeline.core import OfSeries, Series
from eval_pipeline.notify.config import EventKind, Severity
from eval_pipeline.outcome import MEASUREMENT_CHECK, REGRESSION_CHECK, CheckOutcome, FailingItem

FAILING_CASES_SHOWN = 5


@dataclass(frozen=True)
class FailingCase:
    case_id: str
    predicate: str
    reason: str  # names the turn when the case failed at one


@dataclass(frozen=True)
class LaneRun(OfSeries):
    """What a message says about one lane run: its series, night, checks and first failing cases."""

    series: Series
    run_id: str
    night: str
    checks: tuple[CheckOutcome, ...]
    failing_cases: tuple[FailingCase, ...] = ()  # the first few, hard first
    failing_total: int = 0  # failing case results in all
    measurement_note: str = ""
    void: bool = False  # the run's outcome says it did not measure its runtime
    faults: tuple[Mapping[str, Any], ...] = ()  # the run's faults (failures.fault_counts entries)

    @property
    def threshold_failures(self) -> list[CheckOutcome]:
        return [
            c
            for c in self.checks
            if c.name != MEASUREMENT_CHECK and c.threshold is not None and c.verdict in ("fail", "warn")
        ]

    @property
    def failed(self) -> bool:
        """Void, or a blocking (ERROR) threshold failed: what a later pass recovers from."""
        return self.void or any(c.verdict == "fail" for c in self.threshold_failures)


@dataclass(frozen=True)
class Event:
    kind: EventKind
    severity: Severity
    run: LaneRun
    checks: tuple[CheckOutcome, ...]  # the checks the event is about
    headline: str  # one line: what happened to which series

    @property
    def dedup_key(self) -> tuple[str, str, str]:
        """One message per series, event and night."""
        return (self.run.series.key, self.kind, self.run.night)


def lane_run_events(run: LaneRun, *, previous_failed: bool | None) -> list[Event]:
    """The events of one lane run; ``previous_failed``: whether the series' previous run failed
    (None: it has none)."""
    label = run.series.label
    if run.void:
        measurement = tuple(c for c in run.checks if c.name == MEASUREMENT_CHECK)
        return [Event("void", "ERROR", run, measurement, f"{label}: void, the runtime was not measured")]
    events: list[Event] = []
    failed = run.threshold_failures
    if failed:
        severity: Severity = "ERROR" if any(c.severity == "ERROR" for c in failed) else "WARN"
        names = ", ".join(c.name for c in failed)
        events.append(
            Event(
                "check_failed",
                severity,
                run,
                tuple(failed),
                f"{label}: {len(failed)} check(s) failed: {names}",
            )
        )
    regression = next((c for c in run.checks if c.name == REGRESSION_CHECK and c.verdict == "warn"), None)
    if regression is not None:
        events.append(
            Event("regression", "WARN", run, (regression,), f"{label}: regressed: {regression.description}")
        )
    if previous_failed and not run.failed:
        events.append(
            Event("recovered", "ERROR", run, (), f"{label}: recovered, its blocking checks pass again")
        )
    return events


def regressed_metrics(check: CheckOutcome) -> list[str]:
    """The metrics the regression check names in its metadata (empty when it names none)."""
    listed = check.metadata.get("regressed_metrics")
    return [str(m) for m in listed] if isinstance(listed, (list, tuple)) else []


def first_cases(items: Sequence[FailingItem], limit: int = FAILING_CASES_SHOWN) -> tuple[FailingCase, ...]:
    return tuple(FailingCase(item.case_id, item.predicate, item.text) for item in items[:limit])


def stale_events(
    last_runs: Sequence[tuple[LaneRun, datetime]], *, now: datetime, window: timedelta
) -> list[Event]:
    """A ``stale`` event (filed under ``now``'s night) for each series whose last run, with the
    time it started, is older than ``window``."""
    events = []
    for run, started in last_runs:
        age = now - started
        if age <= window:
            continue
        hours = f"{age.total_seconds() / 3600:.0f} h"
        limit = f"{window.total_seconds() / 3600:g} h"
        headline = f"{run.series.label}: stale, its last run {run.run_id[:8]} started {hours} ago (freshness {limit})"
        events.append(Event("stale", "ERROR", replace(run, night=now.date().isoformat()), (), headline))
    return events
