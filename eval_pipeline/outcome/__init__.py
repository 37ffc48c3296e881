"""A lane run's outcome, decided once where its metrics are judged (run_outcome: its
checks, failing cases and turns, faults, verdict) from its failing rows and faults (failures),
stored with the run and rendered by every surface.

What other rooms use is exported here and loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.core.faces import lazy_exports

if TYPE_CHECKING:
    from eval_pipeline.outcome.failures import (
        BLOCKING_SEVERITIES,
        FAILING_READS,
        REPORT_SEVERITIES,
        FirstFailing,
        case_faults,
        evidence_object,
        failing_cases,
        fault_counts,
        fault_text,
        last_surfaces,
    )
    from eval_pipeline.outcome.run_outcome import (
        GATE_CHECK,
        HARD,
        LANE_CHECKS,
        MEASUREMENT_CHECK,
        REGRESSION_CHECK,
        CheckOutcome,
        FailingItem,
        RunOutcome,
        committed_outcome,
        judge_run,
        regression_check,
        rounded,
    )

_EXPORTS: dict[str, str] = {
    "BLOCKING_SEVERITIES": "failures",
    "CheckOutcome": "run_outcome",
    "FAILING_READS": "failures",
    "FailingItem": "run_outcome",
    "FirstFailing": "failures",
    "GATE_CHECK": "run_outcome",
    "HARD": "run_outcome",
    "LANE_CHECKS": "run_outcome",
    "MEASUREMENT_CHECK": "run_outcome",
    "REGRESSION_CHECK": "run_outcome",
    "REPORT_SEVERITIES": "failures",
    "RunOutcome": "run_outcome",
    "case_faults": "failures",
    "committed_outcome": "run_outcome",
    "evidence_object": "failures",
    "failing_cases": "failures",
    "fault_counts": "failures",
    "fault_text": "failures",
    "judge_run": "run_outcome",
    "last_surfaces": "failures",
    "regression_check": "run_outcome",
    "rounded": "run_outcome",
}
__all__ = [
    "BLOCKING_SEVERITIES",
    "FAILING_READS",
    "GATE_CHECK",
    "HARD",
    "LANE_CHECKS",
    "MEASUREMENT_CHECK",
    "REGRESSION_CHECK",
    "REPORT_SEVERITIES",
    "CheckOutcome",
    "FailingItem",
    "FirstFailing",
    "RunOutcome",
    "case_faults",
    "committed_outcome",
    "evidence_object",
    "failing_cases",
    "fault_counts",
    "fault_text",
    "judge_run",
    "last_surfaces",
    "regression_check",
    "rounded",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
