"""The ``openai:`` adapter's connection pool notices a keep-alive connection the server closed
while it was idle (the socket check of ``runtimes/openai_pool.py``) and sends the next turn on a
new connection, instead of on the closed one."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager

from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.adapters.openai_http import OpenAIOptions, OpenAIRuntime
from eval_pipeline_tests.notify.hostile_receivers import read_request


@contextmanager
def one_reply_per_connection() -> Iterator[tuple[str, list[int]]]:
    """A server that answers one request per connection, says keep-alive, and closes the
    connection a moment after answering; yields its URL and the connections it accepted."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with closing(connection):
                accepted.append(1)
                prompt = json.loads(read_request(connection).partition(b"\r\n\r\n")[2])["messages"][-1][
                    "content"
                ]
                reply = {"id": "x", "model": "m", "choices": [{"message": {"content": f"re: {prompt}"}}]}
                body = json.dumps(reply).encode()
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                time.sleep(0.1)  # then closed, idle, without a word

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    finally:
        listener.close()
        thread.join(timeout=5)


def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    with one_reply_per_connection() as (url, accepted):
        runtime = build_runtime(f"openai:{url}", {"model": "m", "max_retries": 0})
        assert isinstance(runtime, OpenAIRuntime) and isinstance(runtime.options, OpenAIOptions)
        try:
            first = runtime.complete([{"role": "user", "content": "one"}], None)
            time.sleep(0.5)  # the server has closed the connection the pool keeps
            second = runtime.complete([{"role": "user", "content": "two"}], None)
        finally:
            runtime.close()
    assert (first.surface, second.surface) == ("re: one", "re: two")
    assert len(accepted) == 2  # the second turn went out on a new connection
