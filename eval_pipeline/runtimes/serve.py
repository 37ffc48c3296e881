"""The reference runtime as an OpenAI-compatible chat-completions endpoint on 127.0.0.1.

``POST /v1/chat/completions`` answers the last user message of the request. The server
keeps no conversation state: each request rebuilds a fresh reference session from the
request's message list (every user message, in order), so answers are deterministic and
any number of clients can share one server. Besides ``content``, the assistant message
carries the reference runtime's ``grounding_source``, ``surface_tag`` and
``epistemic_status`` (extra fields at ``choices.0.message.<field>``, where the ``openai:``
adapter reads a field its ``response_fields`` option does not map); ``usage`` counts whitespace-separated words, not model tokens.
A request with ``"stream": true`` is answered as server-sent ``chat.completion.chunk`` events
(the extra fields in the first chunk, the text word by word, usage last when
``stream_options.include_usage`` asks for it). ``GET /v1/models`` lists the one model,
``reference``; every response carries an ``x-request-id``.

Injected faults make the HTTP path testable: a fraction of requests fail with 500 or 429
(with ``Retry-After``), another fraction stall for ``stall_s`` before answering (past a
client's timeout). Whether a request faults is a pure function of the seed, the request
body and how many times that body has been seen, so a run is reproducible whatever the
arrival order, and a retried request draws again. A rate limit (``rate_limit_rps``) is a token
bucket of ``rate_limit_burst`` requests refilled at that rate: a request that finds it empty
is refused with 429 and a ``Retry-After`` of the wait for the next token, as a gateway does.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from eval_pipeline.runtimes.base import TurnResponse
from eval_pipeline.runtimes.reference import ReferenceRuntime

COMPLETIONS_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
MODEL_ID = "reference"  # what /v1/models lists; completions answer whatever model name is sent

Fault = Literal["ok", "error_500", "rate_limited_429", "stall", "over_rate_limit_429"]


@dataclass(frozen=True)
class ServeConfig:
    """What the server injects. Rates are fractions of requests in [0, 1]."""

    latency_ms: float = 0.0
    fault_rate: float = 0.0
    stall_rate: float = 0.0
    stall_s: float = 30.0
    retry_after_s: float = 1.0
    seed: int = 0
    glosses: bool = True
    api_key: str | None = None  # when set, requests must send ``Authorization: Bearer <key>``
    rate_limit_rps: float = 0.0  # requests a second the server takes (0: no limit)
    rate_limit_burst: int = 10  # requests the bucket holds

    def __post_init__(self) -> None:
        if not (0.0 <= self.fault_rate <= 1.0 and 0.0 <= self.stall_rate <= 1.0):
            raise ValueError("fault_rate and stall_rate must be within [0, 1]")
        if self.fault_rate + self.stall_rate > 1.0:
            raise ValueError("fault_rate + stall_rate must not exceed 1")
        if self.latency_ms < 0 or self.stall_s < 0 or self.retry_after_s < 0:
            raise ValueError("latency_ms, stall_s and retry_after_s must be >= 0")
        if self.rate_limit_rps < 0 or self.rate_limit_burst < 1:
            raise ValueError("rate_limit_rps must be >= 0 and rate_limit_burst >= 1")


class TokenBucket:
    """``rate`` tokens a second, at most ``capacity`` held; a request takes one."""

    def __init__(self, rate: float, capacity: int, now: float) -> None:
        self.rate = rate
        self.capacity = float(capacity)
        self.tokens = float(capacity)
        self.updated = now

    def take(self, now: float) -> float:
        """0.0 when a token was taken, else the seconds until the next one."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


def draw(seed: int, body: bytes, occurrence: int) -> tuple[float, float]:
    """Two uniform numbers in [0, 1) decided by the seed, the body and its occurrence number."""
    digest = hashlib.sha256(b"%d|%d|" % (seed, occurrence) + body).digest()
    return int.from_bytes(digest[:8], "big") / 2**64, int.from_bytes(digest[8:16], "big") / 2**64


def choose_fault(config: ServeConfig, body: bytes, occurrence: int) -> Fault:
    """The fault (or ``ok``) for the ``occurrence``-th arrival of ``body``."""
    which, kind = draw(config.seed, body, occurrence)
    if which < config.fault_rate:
        return "error_500" if kind < 0.5 else "rate_limited_429"
    if which < config.fault_rate + config.stall_rate:
        return "stall"
    return "ok"


class RequestError(ValueError):
    """A request body that is not a chat-completions request."""


def user_prompts(payload: Any) -> list[str]:
    """The user messages of a chat-completions request, in order (the last one is answered)."""
    if not isinstance(payload, dict):
        raise RequestError("request body must be a JSON object")
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list")
    prompts: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(f"messages[{i}] must be an object with a 'role'")
        if message["role"] != "user":
            continue
        content = message.get("content")
        if not isinstance(content, str):
            raise RequestError(f"messages[{i}].content must be a string")
        prompts.append(content)
    if not prompts or messages[-1].get("role") != "user":
        raise RequestError("the last message must be a user message")
    return prompts


def answer(runtime: ReferenceRuntime, prompts: list[str]) -> TurnResponse:
    """Replay every user prompt in a fresh session; the answer to the last one."""
    session = runtime.open_session("serve")
    response = None
    for prompt in prompts:
        response = session.send(prompt)
    assert response is not None
    return response


def usage(response: TurnResponse, prompts: list[str]) -> dict[str, int]:
    prompt_words = sum(len(p.split()) for p in prompts)
    completion_words = len(response.surface.split())
    return {
        "prompt_tokens": prompt_words,
        "completion_tokens": completion_words,
        "total_tokens": prompt_words + completion_words,
    }


# The reference runtime's typed fields, carried beside ``content`` in the assistant message.
EXTRA_FIELDS = ("grounding_source", "surface_tag", "epistemic_status")


def extra_fields(response: TurnResponse) -> dict[str, str | None]:
    """The reference runtime's typed fields, carried beside ``content`` in the assistant message."""
    return {name: getattr(response, name) for name in EXTRA_FIELDS}


def completion_body(response: TurnResponse, model: str, prompts: list[str], serial: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": response.surface, **extra_fields(response)}
    return {
        "id": f"chatcmpl-ref-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage(response, prompts),
    }


def completion_chunks(
    response: TurnResponse, model: str, prompts: list[str], serial: int, *, include_usage: bool
) -> list[dict[str, Any]]:
    """The same answer as streamed ``chat.completion.chunk`` objects: one per word of the surface."""
    head = {
        "id": f"chatcmpl-ref-{serial}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    # Splitting before each space keeps the pieces' concatenation equal to the surface.
    pieces = re.findall(r"\s*\S+|\s+$", response.surface) or [""]
    chunks = [chunk({"role": "assistant", "content": pieces[0], **extra_fields(response)})]
    chunks += [chunk({"content": piece}) for piece in pieces[1:]]
    chunks.append(chunk({}, "stop"))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": usage(response, prompts)})
    return chunks


def model_list() -> dict[str, Any]:
    return {"object": "list", "data": [model_card(MODEL_ID)]}


def model_card(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "eval-pipeline"}


class ReferenceServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer answering chat completions from the reference runtime."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # the default (5) resets connections when many clients connect at once

    def __init__(self, port: int = 0, config: ServeConfig | None = None) -> None:
        self.config = config or ServeConfig()
        self.runtime = ReferenceRuntime(glosses=self.config.glosses)
        self._seen: Counter[bytes] = Counter()
        self._lock = threading.Lock()
        self._serial = 0
        self.fault_counts: Counter[str] = Counter()
        rate = self.config.rate_limit_rps
        self._bucket = TokenBucket(rate, self.config.rate_limit_burst, time.monotonic()) if rate else None
        self._thread: threading.Thread | None = None
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that closed its connection (timeout, shutdown) is not a server error
        super().handle_error(request, client_address)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> int:
        """Chat-completion requests that arrived, answered or refused."""
        with self._lock:
            return sum(self.fault_counts.values())

    def arrival(self, body: bytes) -> tuple[Fault, int, float]:
        """Count this arrival; its fault, a serial number for the completion and request ids, and
        the seconds to wait for the rate limit's next token (0 unless refused by it)."""
        key = hashlib.sha256(body).digest()
        with self._lock:
            self._serial += 1
            wait = 0.0 if self._bucket is None else self._bucket.take(time.monotonic())
            if wait:
                self.fault_counts["over_rate_limit_429"] += 1
                return "over_rate_limit_429", self._serial, wait
            self._seen[key] += 1
            fault = choose_fault(self.config, body, self._seen[key])
            self.fault_counts[fault] += 1
            return fault, self._serial, 0.0

    def next_serial(self) -> int:
        """A serial number for a request that draws no fault (model lists, unknown routes)."""
        with self._lock:
            self._serial += 1
            return self._serial

    def start_background(self) -> ReferenceServer:
        """Serve from a daemon thread (tests, benchmarks); ``stop()`` ends it."""
        self._thread = threading.Thread(target=self.serve_forever, name="serve-reference", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    disable_nagle_algorithm = True  # else delayed ACKs hold back every keep-alive answer
    server: ReferenceServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the console; faults show in the client's transcripts

    def do_GET(self) -> None:
        if not self._authorized():
            return
        serial = self.server.next_serial()
        path = self.path.split("?")[0].rstrip("/")
        if path == MODELS_PATH:
            self._send_json(HTTPStatus.OK, model_list(), serial)
        elif path == f"{MODELS_PATH}/{MODEL_ID}":
            self._send_json(HTTPStatus.OK, model_card(MODEL_ID), serial)
        elif path.startswith(MODELS_PATH + "/"):
            message = f"no model {path.removeprefix(MODELS_PATH + '/')!r}; this server lists {MODEL_ID!r}"
            self._send_json(HTTPStatus.NOT_FOUND, _error(message, "model_not_found"), serial)
        else:
            message = f"no route GET {self.path}; use GET {MODELS_PATH} or POST {COMPLETIONS_PATH}"
            self._send_json(HTTPStatus.NOT_FOUND, _error(message, "not_found"), serial)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path.rstrip("/") != COMPLETIONS_PATH:
            serial = self.server.next_serial()
            message = f"no route POST {self.path}; use POST {COMPLETIONS_PATH}"
            self._send_json(HTTPStatus.NOT_FOUND, _error(message, "not_found"), serial)
            return
        if not self._authorized():
            return
        try:
            payload = json.loads(body)
            prompts = user_prompts(payload)
        except (json.JSONDecodeError, UnicodeDecodeError, RequestError) as exc:
            error = _error(f"bad request: {exc}", "invalid_request_error")
            self._send_json(HTTPStatus.BAD_REQUEST, error, self.server.next_serial())
            return
        fault, serial, wait = self.server.arrival(body)
        config = self.server.config
        if fault == "over_rate_limit_429":
            headers = {"Retry-After": str(math.ceil(wait)), "retry-after-ms": f"{wait * 1000:.0f}"}
            error = _error(
                f"over the rate limit of {config.rate_limit_rps:g} requests/s", "rate_limit_exceeded"
            )
            self._send_json(HTTPStatus.TOO_MANY_REQUESTS, error, serial, headers)
            return
        if config.latency_ms:
            time.sleep(config.latency_ms / 1000.0)
        if fault == "error_500":
            self._send_json(
                HTTPStatus.INTERNAL_SERVER_ERROR, _error("injected fault", "server_error"), serial
            )
            return
        if fault == "rate_limited_429":
            headers = {
                "Retry-After": str(math.ceil(config.retry_after_s)),
                "retry-after-ms": str(int(config.retry_after_s * 1000)),
            }
            error = _error("injected rate limit", "rate_limit_exceeded")
            self._send_json(HTTPStatus.TOO_MANY_REQUESTS, error, serial, headers)
            return
        if fault == "stall":
            time.sleep(config.stall_s)
        model = str(payload.get("model") or MODEL_ID)
        response = answer(self.server.runtime, prompts)
        if payload.get("stream") is True:
            include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
            chunks = completion_chunks(response, model, prompts, serial, include_usage=include_usage)
            self._send_events(chunks, serial)
        else:
            self._send_json(HTTPStatus.OK, completion_body(response, model, prompts, serial), serial)

    def _authorized(self) -> bool:
        """Whether the request carries the configured key; answers 401 when it does not."""
        api_key = self.server.config.api_key
        if api_key is None or self.headers.get("Authorization") == f"Bearer {api_key}":
            return True
        error = _error("missing or wrong API key", "invalid_api_key")
        self._send_json(HTTPStatus.UNAUTHORIZED, error, self.server.next_serial())
        return False

    def _send_json(
        self, status: HTTPStatus, body: dict[str, Any], serial: int, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            self._send_head(
                status, "application/json", serial, {"Content-Length": str(len(data)), **(headers or {})}
            )
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. timed out during a stall)

    def _send_events(self, chunks: list[dict[str, Any]], serial: int) -> None:
        """Server-sent events, one ``data:`` line per chunk then ``[DONE]``, in chunked encoding."""
        events = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
        try:
            self._send_head(HTTPStatus.OK, "text/event-stream", serial, {"Transfer-Encoding": "chunked"})
            for event in events:
                data = event.encode("utf-8")
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_head(self, status: HTTPStatus, content_type: str, serial: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("x-request-id", f"req-ref-{serial}")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()


def _error(message: str, code: str = "error") -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "code": code}}
