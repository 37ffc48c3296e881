"""The reference runtime as an OpenAI-compatible chat-completions endpoint on 127.0.0.1.

``POST /v1/chat/completions`` answers the last user message of the request. The server
keeps no conversation state: each request rebuilds a fresh reference session from the
request's message list (every user message, in order), so answers are deterministic and
any number of clients can share one server. Besides ``content``, the assistant message
carries the reference runtime's ``grounding_source``, ``surface_tag`` and
``epistemic_status`` (extra fields an OpenAI client can read, see the ``openai:`` adapter's
``response_fields`` option); ``usage`` counts whitespace-separated words, not model tokens.

Injected faults make the HTTP path testable: a fraction of requests fail with 500 or 429
(with ``Retry-After``), another fraction stall for ``stall_s`` before answering (past a
client's timeout). Whether a request faults is a pure function of the seed, the request
body and how many times that body has been seen, so a run is reproducible whatever the
arrival order, and a retried request draws again.
"""

from __future__ import annotations

import hashlib
import json
import math
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

Fault = Literal["ok", "error_500", "rate_limited_429", "stall"]


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

    def __post_init__(self) -> None:
        if not (0.0 <= self.fault_rate <= 1.0 and 0.0 <= self.stall_rate <= 1.0):
            raise ValueError("fault_rate and stall_rate must be within [0, 1]")
        if self.fault_rate + self.stall_rate > 1.0:
            raise ValueError("fault_rate + stall_rate must not exceed 1")
        if self.latency_ms < 0 or self.stall_s < 0 or self.retry_after_s < 0:
            raise ValueError("latency_ms, stall_s and retry_after_s must be >= 0")


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


def completion_body(response: TurnResponse, model: str, prompts: list[str], serial: int) -> dict[str, Any]:
    prompt_words = sum(len(p.split()) for p in prompts)
    completion_words = len(response.surface.split())
    return {
        "id": f"chatcmpl-ref-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": response.surface,
                    "grounding_source": response.grounding_source,
                    "surface_tag": response.surface_tag,
                    "epistemic_status": response.epistemic_status,
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": completion_words,
            "total_tokens": prompt_words + completion_words,
        },
    }


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

    def arrival(self, body: bytes) -> tuple[Fault, int]:
        """Count this arrival; its fault and a serial number for the completion id."""
        key = hashlib.sha256(body).digest()
        with self._lock:
            self._seen[key] += 1
            self._serial += 1
            fault = choose_fault(self.config, body, self._seen[key])
            self.fault_counts[fault] += 1
            return fault, self._serial

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
    disable_nagle_algorithm = True  # else delayed ACKs add ~40 ms to every keep-alive answer
    server: ReferenceServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the console; faults show in the client's transcripts

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path.rstrip("/") != COMPLETIONS_PATH:
            self._send_json(
                HTTPStatus.NOT_FOUND, _error(f"no route {self.path}; use POST {COMPLETIONS_PATH}")
            )
            return
        config = self.server.config
        if config.api_key is not None and self.headers.get("Authorization") != f"Bearer {config.api_key}":
            self._send_json(HTTPStatus.UNAUTHORIZED, _error("missing or wrong API key", "invalid_api_key"))
            return
        try:
            payload = json.loads(body)
            prompts = user_prompts(payload)
        except (json.JSONDecodeError, UnicodeDecodeError, RequestError) as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, _error(f"bad request: {exc}", "invalid_request_error"))
            return
        fault, serial = self.server.arrival(body)
        if config.latency_ms:
            time.sleep(config.latency_ms / 1000.0)
        if fault == "error_500":
            self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, _error("injected fault", "server_error"))
            return
        if fault == "rate_limited_429":
            headers = {
                "Retry-After": str(math.ceil(config.retry_after_s)),
                "retry-after-ms": str(int(config.retry_after_s * 1000)),
            }
            self._send_json(
                HTTPStatus.TOO_MANY_REQUESTS, _error("injected rate limit", "rate_limit_exceeded"), headers
            )
            return
        if fault == "stall":
            time.sleep(config.stall_s)
        model = str(payload.get("model") or "reference")
        response = answer(self.server.runtime, prompts)
        self._send_json(HTTPStatus.OK, completion_body(response, model, prompts, serial))

    def _send_json(
        self, status: HTTPStatus, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. timed out during a stall)


def _error(message: str, code: str = "error") -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "code": code}}
