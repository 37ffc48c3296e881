"""A streamed answer's generation rate (tokens per second after its first token) is measured
apart from its latency and TTFT, which include any wait at the server."""

from __future__ import annotations

import pandas as pd
import pytest

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.metrics.usage import GENERATION_RATE, generation_rates, timing_text, usage_metrics
from eval_pipeline.run.drive import drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.runtimes.scripted_server import chunk, event_stream, scripted

QUEUED_S = 1.0  # the server holds the request this long before its first token: a queue
GENERATING_S = 0.5  # then generates the other 10 tokens


def test_the_rate_leaves_out_the_wait_before_the_first_token() -> None:
    stream = event_stream(
        [
            chunk({"role": "assistant", "content": "One"}),
            chunk({"content": " two three four five six seven eight nine ten eleven."}),
            chunk({}, finish_reason="stop"),
            {
                "id": "u",
                "object": "chat.completion.chunk",
                "model": "m",
                "choices": [],
                "usage": {"prompt_tokens": 5, "completion_tokens": 11, "total_tokens": 16},
            },
        ],
        [0.0, GENERATING_S, 0.0, 0.0, 0.0],
        delay_s=QUEUED_S,
    )
    threads = [Thread(case_id="c", turns=(TurnRequest(turn_index=0, role="turn", prompt="Count."),))]
    with scripted(stream) as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "m", "stream": True})
        try:
            turns = drive(runtime, threads)
        finally:
            runtime.close()
    (rate,) = generation_rates(turns).tolist()
    # 10 tokens in about 0.5 s: 20 tokens/s, give or take the timing of the chunks' arrival (with the
    # 1 s wait counted it would be under 7).
    assert 10 / (GENERATING_S * 1.6) < rate < 10 / (GENERATING_S * 0.8)
    assert turns["latency_ms"].iloc[0] > (QUEUED_S + GENERATING_S) * 1000  # latency holds the wait
    values = {v.metric: v.value for v in usage_metrics(turns)}
    assert values[GENERATION_RATE] == pytest.approx(rate)
    assert timing_text(values).endswith(f"; {rate:.1f} tokens/s")


def test_a_turn_not_streamed_has_no_rate() -> None:
    turns = pd.DataFrame(
        {
            "latency_ms": [900.0, 800.0],
            "ttft_ms": [None, 100.0],
            "completion_tokens": pd.array([20, 1], dtype="Int64"),
        }
    )
    assert generation_rates(turns).isna().all()  # not streamed; one token only
    assert "tokens/s" not in timing_text({GENERATION_RATE: None})
