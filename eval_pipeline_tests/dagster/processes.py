"""Real Dagster processes for tests: the webserver (its GraphQL API is what the UI reads) and the
daemon (schedules, the run queue, freshness), both on the test's own DAGSTER_HOME."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eval_pipeline_tests.paths import PROJECT_ROOT

BIN = Path(sys.executable).parent
STARTUP_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


@contextmanager
def webserver(log: Path, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """``dagster-webserver -w workspace.yaml`` on a free port; yields its base URL once it answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=PROJECT_ROOT,
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"dagster-webserver exited: {log.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/server_info", timeout=5):
                        break
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"dagster-webserver did not answer: {log.read_text()[-2000:]}"
                        ) from None
                    time.sleep(1)
            wait_for_code_location(url)
            yield url
        finally:
            _stop(process)


def wait_for_code_location(url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
    while True:
        entries = graphql(url, query)["workspaceOrError"]["locationEntries"]
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"code location not loaded: {entries}")
        time.sleep(1)


def graphql(url: str, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": dict(variables or {})}).encode()
    request = urllib.request.Request(
        f"{url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.loads(response.read())
    if answer.get("errors"):
        raise RuntimeError(f"GraphQL errors: {answer['errors']}")
    return dict(answer["data"])


@contextmanager
def daemon(log: Path, env: Mapping[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``dagster-daemon run -w workspace.yaml`` (the run queue, schedules, freshness)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"],
            cwd=PROJECT_ROOT,
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            yield process
        finally:
            _stop(process)
