"""Durations read as a person reads them, never in exponent form."""

from __future__ import annotations

import pytest

from eval_pipeline.durations import format_duration
from eval_pipeline.usage import timing_text


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (0.0, "0 ms"),
        (0.0263, "0.0263 ms"),
        (12.34, "12.3 ms"),
        (849.6, "850 ms"),
        (999.7, "1.0 s"),  # rounded before the unit is chosen: never "1000 ms"
        (28_480.0, "28.5 s"),
        (50_160.0, "50.2 s"),
        (59_960.0, "1 min"),
        (252_000.0, "4 min 12 s"),
        (3_900_000.0, "1 h 5 min"),
    ],
)
def test_a_duration_in_the_unit_that_reads(ms: float, shown: str) -> None:
    assert format_duration(ms) == shown


def test_a_runs_latency_line_reads_in_seconds_not_exponents() -> None:
    line = timing_text({"latency_p50_ms": 28_480.0, "latency_p95_ms": 50_160.0, "latency_p99_ms": 850.0})
    assert line == "latency p50/p95/p99 28.5 s / 50.2 s / 850 ms; TTFT p50/p95 n/a / n/a"
    assert "e+" not in line
