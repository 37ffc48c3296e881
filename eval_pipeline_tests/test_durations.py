"""Durations read as durations: ``28.5 s``, ``850 ms``, never scientific notation."""

from __future__ import annotations

import math

import pytest

from eval_pipeline.core.durations import duration_text
from eval_pipeline.metrics.usage import timing_text


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "n/a"),
        (math.nan, "n/a"),
        (math.inf, "n/a"),
        (0.0, "0.00 ms"),
        (0.412, "0.41 ms"),
        (3.24, "3.2 ms"),
        (850.2, "850 ms"),
        (999.6, "1.0 s"),
        (28_480.0, "28.5 s"),
        (50_160.0, "50.2 s"),
        (59_990.0, "1 min 00 s"),
        (125_000.0, "2 min 05 s"),
        (3_725_000.0, "1 h 02 min"),
        (-850.0, "-850 ms"),
    ],
)
def test_duration_text(ms: float | None, text: str) -> None:
    assert duration_text(ms) == text


def test_the_usage_line_prints_latencies_as_durations() -> None:
    usage = {
        "latency_p50_ms": 28_480.0,
        "latency_p95_ms": 50_160.0,
        "latency_p99_ms": 50_160.0,
        "ttft_p50_ms": 850.0,
    }
    text = timing_text(usage)
    assert text == "latency p50/p95/p99 28.5 s / 50.2 s / 50.2 s; TTFT p50/p95 850 ms / n/a"
    assert "e+" not in text
