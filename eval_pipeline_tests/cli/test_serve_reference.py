"""``serve-reference`` says the run to start against it, and that plain ``openai:`` run reads the
fields its replies carry (the fluency lane's grounding-dependent predicates are measured)."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_OK


def first_lines(process: subprocess.Popen[str], count: int, seconds: float) -> list[str]:
    """The process's first ``count`` lines of output, as many as came within ``seconds``."""
    assert process.stdout is not None
    stdout, lines = process.stdout, []
    reader = threading.Thread(
        target=lambda: lines.extend(stdout.readline() for _ in range(count)), daemon=True
    )
    reader.start()
    reader.join(seconds)
    return [*lines, *[""] * (count - len(lines))]


@pytest.mark.slow
def test_serve_reference_prints_a_plain_run_that_reads_its_fields_and_stops_on_ctrl_c() -> None:
    executable = Path(sys.executable).parent / "eval-pipeline"
    server = subprocess.Popen(
        [str(executable), "serve-reference", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        serving, hint, command = first_lines(server, 3, 120)
        url = serving.split()[1]
        assert hint == (
            "its replies carry grounding_source, surface_tag, epistemic_status beside content, "
            "where openai: reads them; to run:\n"
        )
        words = shlex.split(command)
        assert words[:4] == ["eval-pipeline", "run", "--runtime", f"openai:{url}"]
        result = CliRunner().invoke(
            app, [*words[1:], "--lane", "deterministic_fluency", "--json"], env={"COLUMNS": "100"}
        )
        assert result.exit_code == EXIT_OK, result.output
        (lane,) = json.loads(result.stdout)["lanes"]
        checks = {c["name"]: c["verdict"] for c in lane["checks"]}
        assert "response_fields" not in command  # a plain run
        assert checks["expected_predicates_pass_rate"] == "pass"  # 4/15 when grounding_source is not read
        assert lane["unsupplied_fields"] == []
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=10) in (0, -signal.SIGINT)
