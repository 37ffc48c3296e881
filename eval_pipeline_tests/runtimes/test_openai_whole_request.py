"""A whole (not streamed) ``openai:`` turn is sent past the SDK's request path, by the SDK's HTTP
client: the server gets the request the SDK's own ``create`` sends (path, headers, body), but
for the SDK's per-request bookkeeping headers."""

from __future__ import annotations

from typing import Any

import pytest

from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.adapters.openai_http import OpenAIRuntime
from eval_pipeline_tests.runtimes.scripted_server import completion, json_reply, scripted

# What the SDK adds to each request it sends itself: its retry count, read timeout, raw mode.
PER_REQUEST = {"x-stainless-retry-count", "x-stainless-read-timeout", "x-stainless-raw-response"}


def _seen(request: dict[str, Any]) -> dict[str, Any]:
    headers = {k: v for k, v in request["headers"].items() if k not in PER_REQUEST | {"host"}}
    return {"path": request["path"], "headers": headers, "json": request["json"]}


# A query in the base URL (a gateway's ``?code=`` key) goes where the SDK puts it, whatever that is.
@pytest.mark.parametrize("query", ["", "?code=abc"])
def test_a_whole_turn_is_the_request_the_sdk_sends(monkeypatch: Any, query: str) -> None:
    monkeypatch.setenv("GATEWAY_KEY", "sk-test-123")
    options = {
        "model": "m",
        "api_key_env": "GATEWAY_KEY",
        "headers": {"X-Trace": "on"},
        "request_params": {"temperature": 0.5},
    }
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo \u2028 ✓"}]
    with scripted(json_reply(completion({"content": "hi"}))) as server:
        runtime = build_runtime(f"openai:{server.base_url}{query}", options)
        assert isinstance(runtime, OpenAIRuntime)
        try:
            answer = runtime.complete(messages, 7)

            async def by_the_sdk() -> object:
                return await runtime._client.chat.completions.with_raw_response.create(
                    model="m",
                    messages=messages,  # type: ignore[arg-type]
                    extra_body={"temperature": 0.5, "seed": 7},
                )

            runtime._loop.run(by_the_sdk())
        finally:
            runtime.close()
        ours, the_sdks = server.requests
    assert answer.surface == "hi"
    assert ours["headers"]["authorization"] == "Bearer sk-test-123"
    assert _seen(ours) == _seen(the_sdks)
