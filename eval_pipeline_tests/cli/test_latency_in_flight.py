"""The run's latency line says what a latency includes when more than one session was in flight:
a turn is timed from send to answer, so against a server that answers fewer at once the run's
own turns wait, and the wait counts. The number is the one the drive kept in flight
(``run.drive.in_flight``), from ``--concurrency`` or the runtime's own preference."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline_tests.runtimes.scripted_server import completion, json_reply, scripted

ANSWER = json_reply(completion({"content": "Truth is the property of a statement that fits the facts."}))


def _latency_line(concurrency: list[str], server_url: str) -> str:
    result = CliRunner().invoke(
        app,
        [
            *("run", "--lane", "deterministic_fluency", "--split", "dev", *concurrency),
            *("--runtime", f"openai:{server_url}", "-o", "model=m", "-o", "max_retries=0"),
        ],
        env={"COLUMNS": "100"},
    )
    assert result.exit_code in (0, 1), result.output
    text = " ".join(result.stdout.split())
    start = text.index("latency p50/p95/p99")
    return text[start : text.index("TTFT", start)]


@pytest.mark.parametrize("sessions", [3, 8])
def test_more_than_one_session_in_flight_is_said_beside_the_latencies(sessions: int) -> None:
    with scripted(ANSWER) as server:
        line = _latency_line(["--concurrency", str(sessions)], server.base_url)
    assert f"(send to answer, up to {sessions} sessions at once: includes any queue)" in line


def test_one_session_at_a_time_adds_nothing_to_the_latencies() -> None:
    with scripted(ANSWER) as server:
        line = _latency_line(["--concurrency", "1"], server.base_url)
    assert "sessions at once" not in line and line.count(" ms") + line.count(" s") >= 3
