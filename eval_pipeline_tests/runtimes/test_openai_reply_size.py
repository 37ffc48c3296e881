"""``openai:`` replies are read up to ``max_reply_bytes`` (default 1 MB), whole or streamed: a
larger one is that turn's ``reply_too_large`` fault as soon as the cap is passed, never read whole."""

from __future__ import annotations

import json
import time

import pytest

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.adapters.openai_http import OpenAIOptions
from eval_pipeline_tests.runtimes.scripted_server import (
    Scripted,
    chunk,
    completion,
    event_stream,
    json_reply,
    scripted,
)

HELD_S = 20.0  # a server holding the rest of a reply this long: a capped read never waits for it
MB = 1_000_000


def answers(base_url: str, **options: object) -> tuple[str | None, str | None, float]:
    """(surface, error, seconds) of one turn sent to ``base_url``."""
    runtime = build_runtime(f"openai:{base_url}", {"model": "m", "max_retries": 0, **options})
    started = time.perf_counter()
    try:
        table = drive(
            runtime, [Thread(case_id="c", turns=(TurnRequest(turn_index=0, role="turn", prompt="Hello?"),))]
        )
    finally:
        runtime.close()
    row = table.iloc[0]
    surface, error = row["surface"], row["error"]
    return (
        surface if isinstance(surface, str) else None,
        error if isinstance(error, str) else None,
        time.perf_counter() - started,
    )


def test_the_default_cap_is_one_megabyte() -> None:
    assert OpenAIOptions(model="m").max_reply_bytes == MB


def test_a_reply_whose_length_says_too_large_is_not_read() -> None:
    big = json_reply(completion({"content": "x" * (2 * MB)}))
    with scripted(big) as server:
        surface, error, _ = answers(server.base_url)
    assert surface is None and error is not None
    assert (
        error.startswith("TurnFault: reply_too_large: a reply from POST ")
        and "max_reply_bytes (1000000" in error
    )


def test_a_chunked_reply_is_cut_off_while_it_is_read() -> None:
    body = json.dumps(completion({"content": "x" * (3 * MB)})).encode()
    # 1.5 MB at once, then the rest only after HELD_S: the fault comes without waiting for it.
    held = Scripted(pieces=((0.0, body[: 3 * MB // 2]), (HELD_S, body[3 * MB // 2 :])))
    with scripted(held) as server:
        surface, error, seconds = answers(server.base_url, timeout_s=60)
    assert surface is None and error is not None and "reply_too_large" in error
    assert seconds < HELD_S / 2


def test_a_streamed_reply_counts_every_chunk() -> None:
    pieces = [chunk({"content": "y" * 100_000}) for _ in range(15)]  # 1.5 MB of chunks
    stream = event_stream([*pieces, chunk({}, finish_reason="stop")], [*([0.0] * 12), HELD_S, 0.0, 0.0, 0.0])
    with scripted(stream) as server:
        surface, error, seconds = answers(server.base_url, stream=True, timeout_s=60)
    assert surface is None and error is not None and "reply_too_large" in error
    assert seconds < HELD_S / 2


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_reply_under_a_raised_cap_is_an_answer(stream: bool) -> None:
    content = "z" * (2 * MB)
    reply = (
        event_stream([chunk({"content": content}), chunk({}, finish_reason="stop")])
        if stream
        else json_reply(completion({"content": content}))
    )
    with scripted(reply) as server:
        surface, error, _ = answers(server.base_url, stream=stream, max_reply_bytes=3 * MB)
    assert error is None and surface == content
    with scripted(reply) as server:
        surface, error, _ = answers(server.base_url, stream=stream, max_reply_bytes=MB)
    assert surface is None and error is not None and "reply_too_large" in error
