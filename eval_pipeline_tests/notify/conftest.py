"""A real webhook receiver on 127.0.0.1, and an evals folder of the test's own (so a test
writes its own ``notify.yaml`` and ``runtimes.yaml``)."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline_tests.paths import PROJECT_ROOT


@dataclass
class Receiver:
    """Records every POST body; answers each with the next of ``statuses`` (then 200)."""

    url: str
    statuses: list[int] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0

    def events(self) -> list[str]:
        return [body.get("event") or body["text"] for body in self.bodies]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    state = Receiver(url=f"http://127.0.0.1:{server.server_port}/hook")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                state.attempts += 1
                status = state.statuses.pop(0) if state.statuses else 200
                if status == 200:
                    state.bodies.append(json.loads(body))
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server.RequestHandlerClass = Handler
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_url() -> str:
    """A URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals", folder)
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(folder))
    return folder
