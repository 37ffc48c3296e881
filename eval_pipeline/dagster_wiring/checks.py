"""Asset checks from a lane's thresholds: the specs, and their results for one run."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg
import pandas as pd

from eval_pipeline.dagster_wiring.markdown import markdown_table
from eval_pipeline.failures import failing_rows_for_metric, fault_counts
from eval_pipeline.history.regression import MetricFinding, findings_frame
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.scoring import Measurement, ThresholdVerdict

MAX_CASES_SHOWN = 25
METRIC_DIGITS = 4  # metadata values are rounded: 0.9333, not 0.9333333333333333
MEASUREMENT_CHECK = "measurement"

_SEVERITY = {"ERROR": dg.AssetCheckSeverity.ERROR, "WARN": dg.AssetCheckSeverity.WARN}


REGRESSION_CHECK = "no_regression"
GATE_CHECK = "error_thresholds_hold"


def regression_check_spec(history_key: dg.AssetKey) -> dg.AssetCheckSpec:
    """The lane's regression check, on its history asset: against the previous run of the series."""
    return dg.AssetCheckSpec(
        name=REGRESSION_CHECK,
        asset=history_key,
        description="No rate fell below the previous run of this series (lane, split, runtime, case set) "
        "by more than its noise (95% Wilson interval on the previous run's counts).",
    )


def rounded(value: float) -> float:
    return round(float(value), METRIC_DIGITS)


def measurement_check_spec(spec: LaneSpec, metrics_key: dg.AssetKey) -> dg.AssetCheckSpec:
    """The run measured its runtime: error_rate at most the lane's (or the target's) max_error_rate."""
    return dg.AssetCheckSpec(
        name=MEASUREMENT_CHECK,
        asset=metrics_key,
        description=f"error_rate <= max_error_rate ({spec.max_error_rate:g} unless the runtime target "
        "sets its own): above it the run is void, the runtime was not measured and no check counts as passed. "
        "It does not block: a void run still goes to history, marked void; the history gate fails the run.",
    )


def measurement_check_result(measured: Measurement, transcripts: pd.DataFrame) -> dg.AssetCheckResult:
    faults = fault_counts(transcripts)
    return dg.AssetCheckResult(
        check_name=MEASUREMENT_CHECK,
        passed=not measured.void,
        severity=dg.AssetCheckSeverity.ERROR,
        description=measured.explain(),
        metadata={
            "verdict": dg.MetadataValue.text("void" if measured.void else "pass"),
            "error_rate": dg.MetadataValue.float(rounded(measured.error_rate or 0.0)),
            "max_error_rate": dg.MetadataValue.float(measured.max_error_rate),
            "faulted_turns": dg.MetadataValue.int(measured.faulted_turns),
            "faults": dg.MetadataValue.md(
                markdown_table(faults, ("turns", "fault"), limit=MAX_CASES_SHOWN, more="distinct faults")
                if faults
                else "No turn faulted."
            ),
        },
    )


def failing_sentence(case_ids: Sequence[str], *, shown: int = 5) -> str:
    """``3 failing case(s): a, b, c.`` (the first few; the metadata table has the rest)."""
    listed = ", ".join(case_ids[:shown]) + (
        f" and {len(case_ids) - shown} more" if len(case_ids) > shown else ""
    )
    return f"{len(case_ids)} failing case(s): {listed}."


def threshold_check_specs(spec: LaneSpec, metrics_key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    """One check per threshold. They do not block: a run that fails a floor is still a
    measurement and goes to history; the history asset's gate check then fails the run."""
    return [
        dg.AssetCheckSpec(name=t.check_name, asset=metrics_key, description=f"{t.describe()}: {t.reason}")
        for t in spec.effective_thresholds
    ]


def gate_check_spec(history_key: dg.AssetKey) -> dg.AssetCheckSpec:
    """Blocking: fails the run, once its results are in history, when an ERROR threshold failed
    or the run is void (its metrics rows say ``void``: the runtime was not measured)."""
    return dg.AssetCheckSpec(
        name=GATE_CHECK,
        asset=history_key,
        description="The run was measured (not void) and every ERROR threshold of the metrics asset held "
        "(checked after the run is in history, so a failing or void run is still recorded; a failure "
        "fails the run).",
        blocking=True,
    )


def gate_check_result(metrics: pd.DataFrame) -> dg.AssetCheckResult:
    """The gate's result, read from the verdicts the metrics table already holds."""
    void = bool(metrics["verdict"].eq("void").any())
    failed = metrics[
        metrics["severity"].eq("ERROR").fillna(False) & metrics["passed"].eq(False).fillna(False)
    ]
    failed_names = [str(m) for m in failed["metric"]]
    if void:
        description = "void: the runtime was not measured (too many turns faulted; see the measurement check)"
    elif failed_names:
        description = f"{len(failed_names)} ERROR threshold(s) failed: {', '.join(failed_names)}"
    else:
        description = "every ERROR threshold held"
    return dg.AssetCheckResult(
        check_name=GATE_CHECK,
        passed=not void and not failed_names,
        severity=dg.AssetCheckSeverity.ERROR,
        description=description,
        metadata={
            "verdict": dg.MetadataValue.text("void" if void else "fail" if failed_names else "pass"),
            "failed_thresholds": dg.MetadataValue.json([] if void else failed_names),
        },
    )


def threshold_check_results(
    verdicts: Sequence[ThresholdVerdict],
    failing: pd.DataFrame,
    faults: pd.DataFrame,
    measured: Measurement,
    *,
    samples: int,
    flaky: pd.DataFrame,
) -> list[dg.AssetCheckResult]:
    """The asset check results of one run, rendered from its threshold verdicts: the verdict
    word, rounded values and, for a check with failing cases, a markdown table of them (case,
    predicate, code, reason). ``failing`` holds the run's failing case predicate rows (at
    least), ``faults`` its faulted transcript rows, ``flaky`` its case predicates whose
    ``samples`` disagree (:func:`eval_pipeline.samples.flaky_within_run`)."""
    results: list[dg.AssetCheckResult] = []
    for verdict in verdicts:
        m, t = verdict.metric, verdict.threshold
        metadata: dict[str, dg.MetadataValue] = {
            "verdict": dg.MetadataValue.text(verdict.word),
            "threshold": dg.MetadataValue.text(verdict.bound),
            "observed": dg.MetadataValue.float(rounded(m.value))
            if m.value is not None
            else dg.MetadataValue.text("missing (no applicable cases)"),
            "failing_cases": dg.MetadataValue.int(len(m.failing_case_ids)),
        }
        if m.denominator is not None:
            metadata["denominator"] = dg.MetadataValue.float(m.denominator)
        if m.failing_case_ids:
            shown = m.failing_case_ids[:MAX_CASES_SHOWN]
            rows = failing_rows_for_metric(m.metric, shown, failing, faults, samples=samples)
            metadata["failing_case_table"] = dg.MetadataValue.md(
                markdown_table(
                    rows.to_dict("records"),
                    ("case_id", "predicate", "code", "reason"),
                    limit=MAX_CASES_SHOWN,
                    more="failing rows (eval-pipeline show RUN lists them all)",
                )
            )
            metadata["failing_case_ids"] = dg.MetadataValue.json(list(m.failing_case_ids[:MAX_CASES_SHOWN]))
        if not flaky.empty:  # samples of a case that disagree: the interval is wide for a reason
            metadata["flaky_cases"] = dg.MetadataValue.md(
                markdown_table(
                    flaky.to_dict("records"),
                    ("case_id", "predicate", "passes", "samples", "flips"),
                    limit=MAX_CASES_SHOWN,
                    more="flaky case predicates",
                )
            )
        if m.samples > 1:
            metadata["samples"] = dg.MetadataValue.int(m.samples)
            metadata["statistic"] = dg.MetadataValue.text(verdict.statistic)
            if verdict.gated_value is not None:
                metadata["gated_value"] = dg.MetadataValue.float(rounded(verdict.gated_value))
        description = f"void: {verdict.void_reason}" if verdict.void else t.reason
        if m.failing_case_ids and not verdict.passed:
            description = f"{failing_sentence(m.failing_case_ids)} {description}"
        results.append(
            dg.AssetCheckResult(
                check_name=t.metric,
                passed=verdict.passed,
                severity=_SEVERITY[t.severity],
                metadata=metadata,
                description=description,
            )
        )
    return results


def regression_check_result(findings: Sequence[MetricFinding]) -> dg.AssetCheckResult:
    regressed = [f for f in findings if f.regressed]
    shown = findings_frame(list(regressed or findings)).to_dict("records")
    columns = ("metric", "value", "previous_value", "delta", "allowed_noise", "note")
    flipped = sorted({case for f in regressed for case in f.flipped_case_ids})
    compared = next((f.previous_run_id for f in findings if f.previous_run_id), None)
    return dg.AssetCheckResult(
        check_name=REGRESSION_CHECK,
        passed=not regressed,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{len(regressed)} metric(s) regressed" if regressed else "no metric regressed",
        metadata={
            "previous_run_id": dg.MetadataValue.text(compared or "none: first run of this series"),
            "regressed_metrics": dg.MetadataValue.json([f.metric for f in regressed]),
            "flipped_case_ids": dg.MetadataValue.json(flipped[:MAX_CASES_SHOWN]),
            "findings": dg.MetadataValue.md(markdown_table(shown, columns, limit=50, more="metrics")),
        },
    )
