"""Asset checks from a lane's thresholds: the specs, and their results for one run."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from eval_pipeline.lanes.spec import LaneSpec, ThresholdSpec
from eval_pipeline.scoring import MetricValue, compare, metric_index

MAX_CASES_SHOWN = 25

_SEVERITY = {"ERROR": dg.AssetCheckSeverity.ERROR, "WARN": dg.AssetCheckSeverity.WARN}


def threshold_check_specs(spec: LaneSpec, metrics_key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    """One check per threshold. ERROR thresholds block: a failing one fails the run."""
    return [
        dg.AssetCheckSpec(
            name=t.check_name,
            asset=metrics_key,
            description=f"{t.describe()}: {t.reason}",
            blocking=t.severity == "ERROR",
        )
        for t in spec.effective_thresholds
    ]


def threshold_check_results(
    thresholds: Sequence[ThresholdSpec], values: Sequence[MetricValue]
) -> list[dg.AssetCheckResult]:
    index = metric_index(values)
    results: list[dg.AssetCheckResult] = []
    for t in thresholds:
        m = index[t.metric]
        passed = compare(m.value, t.op, t.value)
        metadata: dict[str, dg.MetadataValue] = {
            "threshold": dg.MetadataValue.text(f"{t.op} {t.value:g}"),
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
                check_name=t.check_name,
                passed=passed,
                severity=_SEVERITY[t.severity],
                metadata=metadata,
                description=t.reason,
            )
        )
    return results
