"""The ``openai:`` adapter against what real gateways send: tool calls, null content, JSON-valued
fields, every error shape, streamed replies and call ids, each played back over real HTTP."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import openai
import pytest

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.outcome.failures import fault_counts, fault_text
from eval_pipeline.run.drive import drive
from eval_pipeline.runtimes import RuntimeSpecError, TurnResponse, build_runtime
from eval_pipeline.runtimes.adapters.openai_http import OpenAIRuntime
from eval_pipeline.runtimes.faults import TurnFault, split_call_ids
from eval_pipeline.runtimes.serve import ServeConfig
from eval_pipeline_tests.runtimes.helpers import served_reference
from eval_pipeline_tests.runtimes.scripted_server import (
    Scripted,
    chunk,
    completion,
    event_stream,
    json_reply,
    scripted,
)

SECRET = "sk-gateway-planted-secret-0123456789"
TOOL_CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"term": "truth"}'},
    }
]


@contextmanager
def openai_runtime(base_url: str, **options: Any) -> Iterator[OpenAIRuntime]:
    runtime = build_runtime(f"openai:{base_url}", {"model": "m", "max_retries": 0, **options})
    assert isinstance(runtime, OpenAIRuntime)
    try:
        yield runtime
    finally:
        runtime.close()


def ask(reply: Scripted, prompt: str = "What is truth?", **options: Any) -> TurnResponse:
    """The adapter's answer to one prompt when the server sends ``reply``."""
    with scripted(reply) as server, openai_runtime(server.base_url, **options) as runtime:
        return runtime.open_session("case").send(prompt)


def fault_of(reply: Scripted, **options: Any) -> tuple[TurnFault, str]:
    """The fault the adapter raises for ``reply``, and the endpoint it should name."""
    with scripted(reply) as server, openai_runtime(server.base_url, **options) as runtime:
        with pytest.raises(TurnFault) as caught:
            runtime.open_session("case").send("What is truth?")
        return caught.value, f"POST {server.base_url}/chat/completions"


# --- replies that are answers -------------------------------------------------------------------


def test_tool_call_reply_is_an_answer_with_its_calls_in_raw() -> None:
    reply = json_reply(completion({"content": None, "tool_calls": TOOL_CALLS}, finish_reason="tool_calls"))
    with scripted(reply) as server, openai_runtime(server.base_url) as runtime:
        transcripts = drive(
            runtime,
            [
                Thread(
                    case_id="c",
                    turns=tuple(
                        TurnRequest(turn_index=i, role="turn", prompt=p)
                        for i, p in enumerate(["first?", "second?"])
                    ),
                )
            ],
        )
        sent_history = server.requests[1]["json"]["messages"]
    assert transcripts["error"].isna().all()
    assert list(transcripts["surface"]) == ["", ""]
    raw = json.loads(transcripts["raw"].iloc[0])
    assert raw["finish_reason"] == "tool_calls"
    assert raw["tool_calls"] == TOOL_CALLS
    # The next turn sends the tool-call turn back as a plain (empty) assistant message.
    assert sent_history == [
        {"role": "user", "content": "first?"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "second?"},
    ]


def test_tool_calls_can_be_rendered_into_the_surface() -> None:
    message = {"content": "Let me look.", "tool_calls": TOOL_CALLS}
    response = ask(json_reply(completion(message, "tool_calls")), tool_call_surface="json")
    text, rendered = response.surface.split("\n")
    assert text == "Let me look."
    assert json.loads(rendered) == [{"name": "lookup", "arguments": '{"term": "truth"}'}]


def test_null_content_without_tool_calls_is_an_empty_surface() -> None:
    response = ask(json_reply(completion({"content": None}, "length")))
    assert response.surface == ""
    assert response.raw["finish_reason"] == "length"
    assert "tool_calls" not in response.raw


def test_content_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "Truth is "}, {"type": "text", "text": "correspondence."}]
    assert ask(json_reply(completion({"content": parts}))).surface == "Truth is correspondence."


def test_object_and_list_fields_are_stored_as_json() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 20, "total_tokens": 23}
    message = {"content": "x", "grounding_source": "pack", "citations": ["a", {"b": 1}]}
    response = ask(
        json_reply(completion(message, usage=usage)),
        response_fields={
            "grounding_source": "choices.0.message.grounding_source",
            "surface_tag": "choices.0.message.citations",
            "epistemic_status": "usage",
        },
    )
    assert response.grounding_source == "pack"  # a string stays as it is
    assert response.surface_tag is not None and json.loads(response.surface_tag) == ["a", {"b": 1}]
    assert response.epistemic_status is not None and json.loads(response.epistemic_status) == usage


# --- request ids --------------------------------------------------------------------------------


def test_response_id_and_call_id_headers_are_kept_in_raw() -> None:
    headers = {"x-request-id": "req-123", "x-litellm-call-id": "litellm-456", "x-other": "no"}
    reply = json_reply(completion({"content": "ok"}, id="chatcmpl-789"), headers=headers)
    response = ask(reply)
    assert response.raw["id"] == "chatcmpl-789"
    assert response.raw["call_ids"] == {"x-request-id": "req-123", "x-litellm-call-id": "litellm-456"}
    custom = ask(reply, call_id_headers=["X-Other"])
    assert custom.raw["call_ids"] == {"x-other": "no"}


def test_a_turn_that_failed_every_attempt_keeps_every_attempts_call_ids() -> None:
    """Three attempts, three HTTP 500s with their own call ids: the turn's fault names all three,
    and the fault summary groups the turns on the message without them."""
    replies = [
        json_reply({"error": {"message": "boom"}}, status=500, headers={"x-litellm-call-id": f"try-{i}"})
        for i in range(6)
    ]
    with (
        scripted(*replies) as server,
        openai_runtime(server.base_url, max_retries=2, backoff_s=0.01, max_backoff_s=0.01) as runtime,
    ):
        transcripts = drive(
            runtime,
            [
                Thread(case_id=case, turns=(TurnRequest(turn_index=0, role="turn", prompt="What is truth?"),))
                for case in ("a", "b")
            ],
        )
        sent = len(server.requests)
    assert sent == 6 and list(transcripts["attempts"]) == [3, 3]
    endpoint = f"POST {server.base_url}/chat/completions"
    ids_per_turn = []
    for error in transcripts["error"]:  # the sessions run side by side: which ids each got varies
        message, ids = split_call_ids(str(error))
        assert message == f"TurnFault: HTTP 500 from {endpoint}: boom"
        ids_per_turn.append(ids)
    assert [len(set(ids)) for ids in ids_per_turn] == [3, 3]  # each attempt's id, once each
    assert sorted(i for ids in ids_per_turn for i in ids) == [f"x-litellm-call-id: try-{i}" for i in range(6)]
    (fault,) = fault_counts(transcripts)
    assert fault["turns"] == 2 and fault["fault"] == f"TurnFault: HTTP 500 from {endpoint}: boom"
    assert sorted(fault["call_ids"]) == [f"x-litellm-call-id: try-{i}" for i in range(6)]
    assert fault_text(fault).endswith(" and 3 more]")


def test_call_ids_name_a_failed_call_too() -> None:
    reply = json_reply({"error": {"message": "boom"}}, status=500, headers={"x-litellm-call-id": "abc-1"})
    fault, endpoint = fault_of(reply)
    assert str(fault) == f"HTTP 500 from {endpoint}: boom [x-litellm-call-id: abc-1]"


# --- errors -------------------------------------------------------------------------------------

LONG = "x" * 700


@pytest.mark.parametrize(
    ("reply", "message", "transient"),
    [
        pytest.param(
            json_reply(
                {"error": {"message": "Rate limit reached for m", "type": "rate_limit", "code": "429"}},
                status=429,
                headers={"Retry-After": "0"},
            ),
            "HTTP 429 from {endpoint}: Rate limit reached for m",
            True,
            id="openai-json-429",
        ),
        pytest.param(
            Scripted(status=500, body=b"Internal Server Error: upstream exploded", content_type="text/plain"),
            "HTTP 500 from {endpoint}: Internal Server Error: upstream exploded",
            True,
            id="text-plain-500",
        ),
        pytest.param(
            Scripted(status=502, body=b""), "HTTP 502 from {endpoint}: (empty body)", True, id="empty-502"
        ),
        pytest.param(
            json_reply({"detail": "Not Found"}, status=404),
            "HTTP 404 from {endpoint}: Not Found",
            False,
            id="fastapi-detail-404",
        ),
        pytest.param(
            json_reply({"error": "model 'm' is not allowed"}, status=400),
            "HTTP 400 from {endpoint}: model 'm' is not allowed",
            False,
            id="string-error-400",
        ),
        pytest.param(
            Scripted(status=503, body=LONG.encode(), content_type="text/plain"),
            "HTTP 503 from {endpoint}: " + "x" * 499 + "…",
            True,
            id="long-body-cut-to-500",
        ),
        pytest.param(
            Scripted(body=b"<html>gateway login page</html>", content_type="text/html"),
            "malformed reply from {endpoint}: the body: not valid JSON: Expecting value at column 1: "
            "'<html>gateway login page</html>'",
            False,
            id="200-not-json",
        ),
        pytest.param(
            json_reply({"object": "chat.completion", "choices": []}),
            "malformed reply from {endpoint}: no choices[0].message",
            False,
            id="200-no-choices",
        ),
        pytest.param(
            json_reply(completion({"content": 42})),
            "malformed reply from {endpoint}: choices[0].message.content is a int, not text",
            False,
            id="200-content-not-text",
        ),
    ],
)
def test_error_shapes_give_url_status_once_and_the_server_message(
    reply: Scripted, message: str, transient: bool
) -> None:
    fault, endpoint = fault_of(reply)
    assert str(fault) == message.format(endpoint=endpoint)
    assert fault.transient is transient
    assert "Error code" not in str(fault)


def test_retry_after_of_a_429_is_kept() -> None:
    fault, _ = fault_of(
        json_reply({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "7"})
    )
    assert fault.retry_after == 7.0


def test_a_key_echoed_by_the_server_and_url_credentials_stay_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_GATEWAY_KEY", SECRET)
    echo = json_reply(
        {"error": {"message": f"Invalid proxy server token passed. Received API Key = {SECRET}"}}, status=401
    )
    with scripted(echo) as server:
        endpoint = f"POST {server.base_url}/chat/completions"
        with (
            openai_runtime(server.base_url, api_key_env="EVAL_GATEWAY_KEY") as runtime,
            pytest.raises(TurnFault) as echoed,
        ):
            runtime.open_session("case").send("hi")
        sent_auth = server.requests[0]["headers"]["authorization"]
        with_credentials = server.base_url.replace("http://", f"http://user:{SECRET}@")
        with openai_runtime(with_credentials) as runtime, pytest.raises(TurnFault) as from_url:
            runtime.open_session("case").send("hi")
    assert sent_auth == f"Bearer {SECRET}"  # the key did go to the server...
    assert str(echoed.value) == (  # ...but not into the recorded error
        f"HTTP 401 from {endpoint}: Invalid proxy server token passed. Received API Key = [redacted]"
    )
    assert str(from_url.value).startswith(f"HTTP 401 from {endpoint}: ")  # the URL without its credentials


def test_refused_connection_names_the_url_and_the_cause() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with openai_runtime(f"http://127.0.0.1:{port}/v1") as runtime, pytest.raises(TurnFault) as caught:
        runtime.open_session("case").send("hi")
    text = str(caught.value)
    assert text.startswith(f"connection failed: POST http://127.0.0.1:{port}/v1/chat/completions: ")
    assert "ConnectionRefused" in text or "Connection refused" in text
    assert caught.value.transient


def test_timeout_names_the_url() -> None:
    fault, endpoint = fault_of(
        replace(json_reply(completion({"content": "late"})), delay_s=1.0), timeout_s=0.3
    )
    assert str(fault) == f"timed out after 0.3s: {endpoint}"
    assert fault.transient


# --- streaming ----------------------------------------------------------------------------------


def test_streamed_reply_is_assembled_and_time_to_first_token_recorded() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    stream = event_stream(
        [
            ": keep-alive comment",
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Truth is "}),
            chunk({"content": "correspondence."}),
            chunk({}, "stop"),
            {"id": "chatcmpl-streamed", "choices": [], "usage": usage},
        ],
        delays=[0.0, 0.0, 0.25, 0.2, 0.0, 0.0],
        headers={"x-request-id": "req-s1"},
    )
    with (
        scripted(stream) as server,
        openai_runtime(
            server.base_url,
            request_params={"stream": True, "stream_options": {"include_usage": True}, "seed": 1},
        ) as runtime,
    ):
        response = runtime.open_session("case").send("What is truth?")
        sent = server.requests[0]["json"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True} and sent["seed"] == 1
    assert response.surface == "Truth is correspondence."
    raw = response.raw
    assert raw["finish_reason"] == "stop" and raw["usage"] == usage and raw["chunks"] == 5
    assert raw["id"] == "chatcmpl-streamed" and raw["call_ids"] == {"x-request-id": "req-s1"}
    # The empty first delta is no token: the first token waited for the 0.25 s pause.
    assert raw["ttft_ms"] >= 250


def test_streamed_tool_call_pieces_are_merged() -> None:
    stream = event_stream(
        [
            chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": ""},
                        }
                    ],
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"term": '}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"truth"}'}}]}),
            chunk({}, "tool_calls"),
        ]
    )
    response = ask(stream, stream=True)
    assert response.surface == ""
    assert response.raw["finish_reason"] == "tool_calls"
    assert response.raw["tool_calls"] == TOOL_CALLS


def test_a_server_that_ignores_stream_is_read_whole() -> None:
    response = ask(json_reply(completion({"content": "whole"})), stream=True)
    assert response.surface == "whole"
    assert "ttft_ms" not in response.raw


@pytest.mark.parametrize(
    ("stream", "message", "transient"),
    [
        pytest.param(
            event_stream([chunk({"content": "Tru"}), chunk({"content": "th"})], break_off=True),
            "stream broke off from {endpoint}: after 2 chunks: RemoteProtocolError",
            True,
            id="connection-dropped",
        ),
        pytest.param(
            event_stream(
                [chunk({"content": "Tru"}), {"error": {"message": "upstream timeout", "code": 504}}]
            ),
            "malformed reply from {endpoint}: chunk 2: the stream carried an error: upstream timeout",
            False,
            id="error-event",
        ),
        pytest.param(
            event_stream([chunk({"content": "Tru"}), "{not json"]),
            "malformed reply from {endpoint}: chunk 2: not valid JSON: Expecting property name",
            False,
            id="chunk-not-json",
        ),
        pytest.param(
            Scripted(body=b"<html>busy</html>", content_type="text/html"),
            "malformed reply from {endpoint}: the body: not valid JSON: Expecting value at column 1: "
            "'<html>busy</html>'",
            False,
            id="neither-stream-nor-json",
        ),
        pytest.param(
            event_stream([]),
            "malformed reply from {endpoint}: the stream ended without a chunk",
            False,
            id="no-chunks",
        ),
    ],
)
def test_stream_faults(stream: Scripted, message: str, transient: bool) -> None:
    fault, endpoint = fault_of(stream, stream=True)
    assert str(fault).startswith(message.format(endpoint=endpoint))
    assert fault.transient is transient


def test_stream_option_is_checked() -> None:
    with pytest.raises(RuntimeSpecError, match=r"stream and request_params\.stream disagree"):
        build_runtime(
            "openai:http://127.0.0.1:9/v1",
            {"model": "m", "stream": False, "request_params": {"stream": True}},
        )
    with pytest.raises(RuntimeSpecError, match="stream: Input should be a valid boolean"):
        build_runtime(
            "openai:http://127.0.0.1:9/v1", {"model": "m", "request_params": {"stream": "sometimes"}}
        )


# --- serve-reference ----------------------------------------------------------------------------


def test_served_reference_streams_the_same_answer_it_gives_whole() -> None:
    fields = {"grounding_source": "choices.0.message.grounding_source"}
    with served_reference(ServeConfig(latency_ms=20)) as server:
        with openai_runtime(server.base_url, response_fields=fields) as whole_runtime:
            whole = whole_runtime.open_session("a").send("What is truth?")
        with openai_runtime(
            server.base_url,
            response_fields=fields,
            request_params={"stream": True, "stream_options": {"include_usage": True}},
        ) as streamed_runtime:
            streamed = streamed_runtime.open_session("a").send("What is truth?")
    assert streamed.surface == whole.surface and streamed.grounding_source == whole.grounding_source != "none"
    assert streamed.raw["usage"] == whole.raw["usage"]
    assert streamed.raw["chunks"] == len(whole.surface.split()) + 2  # a chunk per word, finish, usage
    assert streamed.raw["ttft_ms"] >= 20  # the server's latency comes before the first token
    assert whole.raw["call_ids"]["x-request-id"].startswith("req-ref-")


def test_served_reference_lists_its_model() -> None:
    with served_reference(ServeConfig(api_key=SECRET)) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key=SECRET)
        try:
            models = client.models.list()
            card = client.models.retrieve("reference")
            with pytest.raises(openai.NotFoundError, match="no model 'gpt-x'"):
                client.models.retrieve("gpt-x")
        finally:
            client.close()
        with urllib.request.urlopen(
            urllib.request.Request(f"{server.base_url}/models", headers={"Authorization": f"Bearer {SECRET}"})
        ) as reply:
            listed = json.loads(reply.read())
            content_type = reply.headers["Content-Type"]
        with pytest.raises(urllib.error.HTTPError) as unauthorized:
            urllib.request.urlopen(f"{server.base_url}/models")
        with pytest.raises(urllib.error.HTTPError) as unknown:
            urllib.request.urlopen(
                urllib.request.Request(
                    f"{server.base_url}/nope", headers={"Authorization": f"Bearer {SECRET}"}
                )
            )
    assert [m.id for m in models.data] == ["reference"] and card.owned_by == "eval-pipeline"
    assert content_type == "application/json"
    assert listed == {
        "object": "list",
        "data": [{"id": "reference", "object": "model", "created": 0, "owned_by": "eval-pipeline"}],
    }
    assert unauthorized.value.code == 401
    assert unknown.value.code == 404
    assert json.loads(unknown.value.read())["error"]["message"].startswith("no route GET /v1/nope")
