"""A run's usage (turns, tokens, cost, latency and TTFT percentiles) on its viewer page, apart
from its checks, read from the committed history through real HTTP."""

from __future__ import annotations

import dataclasses
import html
import re

import pandas as pd

from eval_pipeline.core.durations import duration_text
from eval_pipeline.history.views import connect
from eval_pipeline.metrics import number_text
from eval_pipeline.metrics.usage import LATENCY_PERCENTILES, TTFT_PERCENTILES, USAGE_METRICS
from eval_pipeline.run.pipeline import LaneRun
from eval_pipeline.viewer.pages import runs as runs_page

from .conftest import StoredRun, record_run
from .viewer_server import get, serving


def with_usage(run: LaneRun) -> LaneRun:
    """``run`` as a priced runtime would have answered it: 7 prompt and 3 completion tokens a turn."""
    metrics = run.metrics.copy()
    turns = float(len(run.transcripts))
    known = {"prompt_tokens": 7 * turns, "completion_tokens": 3 * turns, "cost": 0.25}
    for name, value in known.items():
        metrics.loc[metrics["metric"] == name, "value"] = value
    return dataclasses.replace(run, metrics=metrics)


def test_the_run_page_shows_usage_apart_from_checks(history: str, lane_runs: dict[bool, LaneRun]) -> None:
    run = with_usage(lane_runs[True])
    record_run(history, run, StoredRun("run-u1", "priced", "2024-05-01", True))
    expected = dict(zip(run.metrics["metric"], run.metrics["value"], strict=True))
    with connect(history) as con:
        (lane,) = runs_page.run_page(con, "run-u1").lanes
    # Every usage metric the run reported, in their order; one with no value is left out.
    assert [u.metric for u in lane.usage] == [m for m in USAGE_METRICS if not pd.isna(expected[m])]
    assert all(u.metric not in USAGE_METRICS for u in lane.checks)
    shown = {u.metric: u.value for u in lane.usage}
    assert shown["turns_driven"] == len(run.transcripts) == lane.turns
    assert shown["prompt_tokens"] == expected["prompt_tokens"] and shown["cost"] == 0.25
    assert shown["latency_p50_ms"] == expected["latency_p50_ms"] is not None
    assert "ttft_p50_ms" not in shown  # the reference does not stream
    with serving(history) as url:
        status, page = get(url + "/runs/run-u1")
    assert status == 200
    usage = html.unescape(page.split("<h3>Usage</h3>", 1)[1].split("</table>", 1)[0])
    assert f'<td>prompt_tokens</td><td class="num">{int(expected["prompt_tokens"])}</td>' in usage
    assert '<td>cost</td><td class="num">0.25</td>' in usage
    assert "ttft_p95_ms" not in usage and "null" not in usage


def test_the_usage_table_reads_durations_as_people_read_them(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    """Latencies are shown by the one duration formatter (``0.02 ms``, ``550 ms``, ``28.5 s``),
    never as raw milliseconds (``0.02244``); counts stay numbers."""
    run = lane_runs[True]
    record_run(history, run, StoredRun("run-u2", "timed", "2024-05-02", True))
    expected = dict(zip(run.metrics["metric"], run.metrics["value"], strict=True))
    with serving(history) as url:
        _, page = get(url + "/runs/run-u2")
    usage = html.unescape(page.split("<h3>Usage</h3>", 1)[1].split("</table>", 1)[0])
    shown = dict(re.findall(r'<td>(\w+)</td><td class="num">([^<]*)</td>', usage))
    for name, _ in (*LATENCY_PERCENTILES, *TTFT_PERCENTILES):
        if not pd.isna(expected[name]):
            assert shown[name] == duration_text(expected[name]), name
            assert shown[name] != number_text(expected[name])
    assert "latency_p50_ms" in shown and shown["latency_p50_ms"].endswith(" ms")
    assert shown["turns_driven"] == str(len(run.transcripts))
