"""A check whose metric measured nothing is void with its reason, and the last line counts it."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_OK
from eval_pipeline_tests.runtimes.helpers import served_reference


def test_a_runtime_without_telemetry_leaves_the_telemetry_check_void_with_its_reason() -> None:
    with served_reference() as server:  # an OpenAI-compatible server sends no turn-log telemetry
        result = CliRunner().invoke(
            app,
            [
                *("run", "--lane", "warmed_session_consistency", "--split", "public"),
                *("--runtime", f"openai:{server.base_url}", "-o", "model=reference"),
            ],
            env={"COLUMNS": "100"},
        )
    assert result.exit_code == EXIT_OK, result.output
    # The derived target name is shown with the spec it stands for.
    hint = re.search(
        r"runtime (openai-[0-9a-f]{8}): (\S+) (\{.*?\}) \(not declared in evals/runtimes.yaml\)",
        result.stderr,
    )
    assert hint is not None, result.stderr
    assert (hint.group(2), json.loads(hint.group(3))) == (f"openai:{server.base_url}", {"model": "reference"})
    assert f"warmed_session_consistency [public] · {hint.group(1)}" in result.stdout
    text = " ".join(result.stdout.split())
    assert (
        "telemetry_consistency_rate: void no turn carried telemetry (no_telemetry on 23 of 23 turns)" in text
    )
    # Only that one: the server's grounding_source is read without response_fields.
    assert "1 lane run(s); 0 blocking check failure(s); 0 warning(s); 1 check(s) not measured (void)" in text
