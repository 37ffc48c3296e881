"""The runtime version of an ``openai:`` server that does not serve ``GET /models``: the model
its replies name and the target's spec stand in, said once; cache and resume work; an error
never shows a module path."""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.versions import runtime_version
from eval_pipeline_tests.runtimes.scripted_server import completion, json_reply, scripted

LANE = "deterministic_fluency"
ANSWER = json_reply(completion({"content": "Truth is what the evidence shows."}))
NOTE = "the server lists no models"


def run(base_url: str, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--lane",
            LANE,
            "--split",
            "public",
            "--runtime",
            f"openai:{base_url}",
            "-o",
            "model=m",
            *extra,
        ],
        env={"COLUMNS": "200"},
    )
    return result.exit_code, result.output


def test_the_version_is_the_replied_model_asked_once(caplog: pytest.LogCaptureFixture) -> None:
    # The scripted server answers POST only: GET /models is HTTP 501.
    with (
        scripted(ANSWER) as server,
        caplog.at_level(logging.WARNING, logger="eval_pipeline.runtimes.versions"),
    ):
        first = runtime_version(f"openai:{server.base_url}", {"model": "m"})
        again = runtime_version(f"openai:{server.base_url}", {"model": "m"})
        other = runtime_version(f"openai:{server.base_url}", {"model": "m", "max_retries": 1})
    assert first.facts["model"] == {"listed": False, "replied_model": "scripted-model"}
    assert again.digest == first.digest and other.digest != first.digest  # the spec and options count
    probes = [r["json"] for r in server.requests]
    assert len(probes) == 2 and all(p["max_tokens"] == 1 for p in probes)  # once per target
    notes = [r.getMessage() for r in caplog.records if NOTE in r.getMessage()]
    assert len(notes) == 2 and "HTTP 501" in notes[0] and "'scripted-model'" in notes[0]


def test_cache_and_resume_work_against_a_server_without_models(caplog: pytest.LogCaptureFixture) -> None:
    # Under pytest the note goes to the log capture; on a terminal, to stderr (no handler is set).
    with (
        scripted(ANSWER) as server,
        caplog.at_level(logging.WARNING, logger="eval_pipeline.runtimes.versions"),
    ):
        code, output = run(server.base_url, "--cache")
        assert code == 0, output
        assert sum(NOTE in r.getMessage() for r in caplog.records) == 1
        code, output = run(server.base_url, "--cache")
        assert code == 0, output
        assert "16 turns (16 from the cache)" in output
        code, output = run(server.base_url, "--resume")
        assert code == 0, output
        assert "run failed" not in output


def test_a_server_that_answers_nothing_is_a_clean_error_without_a_module_path() -> None:
    with scripted(json_reply({"error": {"message": "down"}}, status=500)) as server:
        with pytest.raises(
            RuntimeSpecError, match=r"GET /models answered HTTP 501, and a one-token chat completion"
        ):
            runtime_version(f"openai:{server.base_url}", {"model": "m"})
        code, output = run(server.base_url, "--cache")
    assert code == 2, output
    assert "run failed (RuntimeSpecError)" in output and "HTTP 500" in output
    assert "eval_pipeline." not in output and "Traceback" not in output
