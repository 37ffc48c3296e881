"""A run's metrics as the tests that compare runs read them."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from eval_pipeline.metrics.scoring import MetricValue
from eval_pipeline.metrics.usage import TIMED_METRICS, USAGE_METRICS


def untimed(metrics: pd.DataFrame) -> pd.DataFrame:
    """The metrics table without the usage metrics that time the runtime (latency, TTFT): what
    two runs of the same answers, or a run and its replay, must agree on."""
    return metrics[~metrics["metric"].isin(TIMED_METRICS)].reset_index(drop=True)


def without_timings(metrics: dict[str, float | None]) -> dict[str, float | None]:
    """Metric values by name without those that time the runtime (see :func:`untimed`)."""
    return {name: value for name, value in metrics.items() if name not in TIMED_METRICS}


def lane_values(values: Iterable[MetricValue]) -> dict[str, float | None]:
    """The lane's own metrics by name, without the usage metrics every run reports."""
    return {m.metric: m.value for m in values if m.metric not in USAGE_METRICS}
