"""A chat-completions server on 127.0.0.1 that answers with scripted replies, byte for byte.

Real gateways answer in shapes the reference server never produces (tool calls, text/plain
errors, streams that break off); this server plays them back so the ``openai:`` adapter
meets each one over real HTTP. Replies are used in order and the last one repeats; every
request is kept so a test can check what the adapter sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Scripted:
    """One reply. ``pieces`` (delay in seconds, bytes) are sent in chunked encoding instead of ``body``."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    pieces: tuple[tuple[float, bytes], ...] = ()
    break_off: bool = False  # close the connection after the pieces, without ending the body
    delay_s: float = 0.0  # before the status line


def json_reply(document: Any, status: int = 200, headers: dict[str, str] | None = None) -> Scripted:
    return Scripted(status=status, body=json.dumps(document).encode(), headers=headers or {})


def completion(message: dict[str, Any], finish_reason: str = "stop", **top: Any) -> dict[str, Any]:
    """A ``chat.completion`` whose first choice carries ``message``."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": "scripted-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}
        ],
        **top,
    }


def event_stream(
    chunks: list[Any], delays: list[float] | None = None, *, break_off: bool = False, **options: Any
) -> Scripted:
    """Server-sent events: one ``data:`` line per chunk (a dict as JSON, a str as it is), then ``[DONE]``.

    A str starting with ``:`` is sent as an SSE comment line (gateways send them as keep-alives).
    """
    events = [c if isinstance(c, str) else json.dumps(c) for c in chunks]
    if not break_off:
        events.append("[DONE]")
    waits = delays or [0.0] * len(events)
    pieces = tuple(
        (wait, (event if event.startswith(":") else f"data: {event}").encode() + b"\n\n")
        for wait, event in zip([*waits, 0.0], events, strict=False)
    )
    return Scripted(content_type="text/event-stream", pieces=pieces, break_off=break_off, **options)


def chunk(delta: dict[str, Any], finish_reason: str | None = None, **top: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one delta for choice 0."""
    return {
        "id": "chatcmpl-streamed",
        "object": "chat.completion.chunk",
        "model": "scripted-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        **top,
    }


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, replies: list[Scripted]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def next_reply(self, request: dict[str, Any]) -> Scripted:
        with self._lock:
            self.requests.append(request)
            return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


class _ScriptedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ScriptedServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = {
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "json": json.loads(body or b"null"),
        }
        reply = self.server.next_reply(request)
        time.sleep(reply.delay_s)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.pieces:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._send_pieces(reply)
            else:
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out

    def _send_pieces(self, reply: Scripted) -> None:
        for wait, data in reply.pieces:
            time.sleep(wait)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if reply.break_off:
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")


@contextmanager
def scripted(*replies: Scripted) -> Iterator[ScriptedServer]:
    server = ScriptedServer(list(replies))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="scripted-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
