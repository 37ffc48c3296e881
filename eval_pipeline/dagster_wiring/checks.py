"""Asset checks from a lane's thresholds: the specs, and their results for one run."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg
import pandas as pd

from eval_pipeline.dagster_wiring.markdown import markdown_table
from eval_pipeline.history.regression import MetricFinding, findings_frame
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.scoring import ThresholdVerdict

MAX_CASES_SHOWN = 25

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


def threshold_check_specs(spec: LaneSpec, metrics_key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    """One check per threshold. They do not block: a run that fails a floor is still a
    measurement and goes to history; the history asset's gate check then fails the run."""
    return [
        dg.AssetCheckSpec(name=t.check_name, asset=metrics_key, description=f"{t.describe()}: {t.reason}")
        for t in spec.effective_thresholds
    ]


def gate_check_spec(history_key: dg.AssetKey) -> dg.AssetCheckSpec:
    """Blocking: fails the run, once its results are in history, when an ERROR threshold failed."""
    return dg.AssetCheckSpec(
        name=GATE_CHECK,
        asset=history_key,
        description="Every ERROR threshold of the metrics asset held (checked after the run is in history, "
        "so a failing run is still recorded; a failure fails the run).",
        blocking=True,
    )


def gate_check_result(metrics: pd.DataFrame) -> dg.AssetCheckResult:
    """The gate's result, read from the verdicts the metrics table already holds."""
    failed = metrics[
        metrics["severity"].eq("ERROR").fillna(False) & metrics["passed"].eq(False).fillna(False)
    ]
    return dg.AssetCheckResult(
        check_name=GATE_CHECK,
        passed=failed.empty,
        severity=dg.AssetCheckSeverity.ERROR,
        description="every ERROR threshold held"
        if failed.empty
        else f"{len(failed)} ERROR threshold(s) failed: {', '.join(map(str, failed['metric']))}",
        metadata={"failed_thresholds": dg.MetadataValue.json([str(m) for m in failed["metric"]])},
    )


def threshold_check_results(verdicts: Sequence[ThresholdVerdict]) -> list[dg.AssetCheckResult]:
    """The asset check results of one run, rendered from its threshold verdicts."""
    results: list[dg.AssetCheckResult] = []
    for verdict in verdicts:
        m, t = verdict.metric, verdict.threshold
        metadata: dict[str, dg.MetadataValue] = {
            "threshold": dg.MetadataValue.text(verdict.bound),
            "observed": dg.MetadataValue.float(m.value)
            if m.value is not None
            else dg.MetadataValue.text("missing (no applicable cases)"),
            "failing_cases": dg.MetadataValue.int(len(m.failing_case_ids)),
        }
        if m.denominator is not None:
            metadata["denominator"] = dg.MetadataValue.float(m.denominator)
        if m.failing_case_ids:
            shown = list(m.failing_case_ids[:MAX_CASES_SHOWN])
            metadata["failing_case_ids"] = dg.MetadataValue.json(shown)
        results.append(
            dg.AssetCheckResult(
                check_name=t.metric,
                passed=verdict.passed,
                severity=_SEVERITY[t.severity],
                metadata=metadata,
                description=t.reason,
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
