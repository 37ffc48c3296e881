"""Adaptive concurrency: a throttled target is sent less, later, and no turn is lost; every
retry is recorded on its turn. Against a real token-bucket server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.adapters.openai_http import OpenAIRuntime
from eval_pipeline.runtimes.faults import AdaptiveLimit
from eval_pipeline.runtimes.serve import ServeConfig
from eval_pipeline_tests.runtimes.helpers import served_reference


def test_a_throttle_halves_the_limit_once_per_congestion_event() -> None:
    limit = AdaptiveLimit(16)
    sent_before = limit.epoch
    limit.throttled(sent_before, now=100.0, retry_after=None)
    assert limit.slots == 8 and limit.backoffs == 1
    limit.throttled(sent_before, now=100.0, retry_after=None)  # in flight when the limit fell
    assert limit.slots == 8 and limit.backoffs == 1
    limit.throttled(limit.epoch, now=100.0, retry_after=2.5)  # sent under the new limit: halves again
    assert limit.slots == 4 and limit.resume_at == 102.5
    limit.throttled(limit.epoch, now=101.0, retry_after=0.5)  # an earlier end never shortens the wait
    assert limit.resume_at == 102.5


@pytest.mark.parametrize("asked", [86_400.0, float("inf")])
def test_a_retry_after_pauses_the_target_no_longer_than_the_longest_wait(asked: float) -> None:
    limit = AdaptiveLimit(4, max_wait_s=30.0)
    limit.throttled(limit.epoch, now=100.0, retry_after=asked)  # a day, or forever
    assert limit.resume_at == 130.0
    limit.throttled(limit.epoch, now=101.0, retry_after=float("nan"))  # unreadable: no wait asked
    assert limit.resume_at == 130.0


def test_answers_recover_the_limit_additively_up_to_the_maximum() -> None:
    limit = AdaptiveLimit(4)
    for _ in range(3):
        limit.throttled(limit.epoch, now=0.0, retry_after=None)
    assert limit.slots == 1
    limit.answered()  # 1 + 1/1
    assert limit.slots == 2
    limit.answered()
    limit.answered()  # 2 + 1/2 + 1/2.5
    assert limit.slots == 2
    for _ in range(100):
        limit.answered()
    assert limit.limit == 4.0


@pytest.mark.parametrize(
    "bad",
    [
        {"maximum": 0},
        {"maximum": 4, "decrease": 1.0},
        {"maximum": 4, "decrease": 0.0},
        {"maximum": 4, "max_wait_s": -1.0},
        {"maximum": 4, "max_wait_s": float("nan")},
    ],
)
def test_an_adaptive_limit_needs_sane_bounds(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="adaptive limit"):
        AdaptiveLimit(**bad)  # type: ignore[arg-type]


def single_turn(cases: int) -> list[Thread]:
    return [
        Thread(
            case_id=f"c{i:04d}",
            turns=(TurnRequest(turn_index=0, role="turn", prompt=f"What is a river {i}?"),),
        )
        for i in range(cases)
    ]


def test_a_rate_limited_server_loses_no_turn_and_every_retry_is_on_its_turn() -> None:
    config = ServeConfig(latency_ms=5.0, rate_limit_rps=60.0, rate_limit_burst=4)
    options = {"model": "reference", "max_concurrency": 16, "max_retries": 20, "backoff_s": 0.02}
    with served_reference(config) as server:
        runtime = build_runtime(f"openai:{server.base_url}", options)
        assert isinstance(runtime, OpenAIRuntime)
        try:
            rows = drive(runtime, single_turn(90), Sending(concurrency=16))
        finally:
            runtime.close()
        refused = server.fault_counts["over_rate_limit_429"]
        requests = server.requests
    assert rows["error"].isna().all()  # 0 turns lost
    assert refused > 0 and runtime.adaptive_limit.backoffs > 0  # it was throttled, and backed off
    assert requests == int(rows["attempts"].sum())  # every request the server saw is on a turn
    for row in rows.itertuples():
        retries = json.loads(row.raw).get("retries", [])
        assert len(retries) == row.attempts - 1
        assert all("HTTP 429" in text and "over the rate limit" in text for text in retries)
