"""Credentials in a runtime spec (URL userinfo, a secret query value) are never stored or printed."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history import connect
from eval_pipeline.runtimes.redaction import redacted_options, redacted_spec, scrubbed, url_secrets
from eval_pipeline_tests.runtimes.helpers import served_reference

runner = CliRunner()
EXEC_BOT = Path(__file__).parent.parent / "runtimes" / "exec_bot.py"
FLUENCY = ["run", "--lane", "deterministic_fluency", "--split", "dev"]


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ("openai:http://user:sk-abc123@gw.example:8080/v1", "openai:http://***@gw.example:8080/v1"),
        (
            "openai:https://gw.example/v1?api_key=s3cr3t&api-version=2",
            "openai:https://gw.example/v1?api_key=***&api-version=2",
        ),
        ("openai:https://gw.example/v1?x=sk-live-1", "openai:https://gw.example/v1?x=***"),
        ("exec:bot --url 'https://h/?token=t0k&mode=a'", "exec:bot --url 'https://h/?token=***&mode=a'"),
        ("openai:https://gw.example/v1?code=c0de&state=ok", "openai:https://gw.example/v1?code=***&state=ok"),
        (
            "exec:bot --cb 'https://h/cb#access_token=t0k&x=1'",
            "exec:bot --cb 'https://h/cb#access_token=***&x=1'",
        ),
        ("openai:http://127.0.0.1:8000/v1#models", "openai:http://127.0.0.1:8000/v1#models"),
        ("openai:http://127.0.0.1:8000/v1", "openai:http://127.0.0.1:8000/v1"),
        ("reference:no-gloss", "reference:no-gloss"),
    ],
)
def test_a_spec_is_shown_without_its_credentials(spec: str, shown: str) -> None:
    assert redacted_spec(spec) == shown


def test_a_servers_echo_of_the_request_is_scrubbed_of_the_urls_secrets() -> None:
    url = "http://someone:pa55word@gw.example/v1?code=c0de&mode=fast"
    echoed = "no route GET /v1?code=c0de&mode=fast (user someone:pa55word) for http://x:pa55word@gw.example/"
    assert url_secrets(url) == ["pa55word", "c0de"]
    assert (
        scrubbed(echoed, url)
        == "no route GET /v1?code=***&mode=fast (user someone:***) for http://***@gw.example/"
    )


def test_options_are_shown_without_their_credentials() -> None:
    options = {
        "model": "reference",
        "api_key": "plain-looking",
        "headers": {"Authorization": "Bearer abc", "X-Trace": "on", "X-Other": "sk-live-9"},
        "base": "http://user:pw@gw.example/v1",
        "max_retries": 3,
    }
    assert redacted_options(options) == {
        "model": "reference",
        "api_key": "***",
        "headers": {"Authorization": "***", "X-Trace": "on", "X-Other": "***"},
        "base": "http://***@gw.example/v1",
        "max_retries": 3,
    }


@pytest.mark.slow
def test_no_credential_reaches_history_dagster_or_the_terminal(isolated_state: Path) -> None:
    secrets = ("sk-userinfo-secret", "sk-query-secret")
    with served_reference() as server:
        host = server.base_url.split("://", 1)[1]
        openai_spec = f"openai:http://someone:{secrets[0]}@{host}"
        first = runner.invoke(app, [*FLUENCY, "--runtime", openai_spec, "-o", "model=reference"])
    exec_spec = "exec:" + shlex.join(
        [sys.executable, str(EXEC_BOT), "--upstream", f"http://127.0.0.1:9/?api_key={secrets[1]}"]
    )
    second = runner.invoke(app, [*FLUENCY, "--runtime", exec_spec])
    for result in (first, second):
        assert result.exit_code in (0, 1), (result.output, result.exception)
        assert not any(secret in result.output for secret in secrets)
    specs = connect(str(isolated_state / "history")).sql("select runtime_spec from runs").fetchall()
    assert sorted(spec for (spec,) in specs) == sorted(
        [f"openai:http://***@{host}", redacted_spec(exec_spec)]
    )
    leaked = [
        str(path)
        for path in isolated_state.rglob("*")
        if path.is_file() and any(secret.encode() in path.read_bytes() for secret in secrets)
    ]
    assert leaked == []


def test_a_celery_run_refuses_a_spec_holding_a_secret_before_anything_is_stored(isolated_state: Path) -> None:
    """A Celery run's runtime spec travels in its run config, which the instance keeps: a spec
    with credentials is bad input (exit 2), named without them, and no run is recorded."""
    result = runner.invoke(
        app,
        [
            *FLUENCY,
            "--executor",
            "celery",
            "--runtime",
            "openai:http://user:hunter2@127.0.0.1:9/v1",
            "-o",
            "model=x",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "a Celery run stores its runtime spec in the instance" in " ".join(result.stderr.split())
    assert "hunter2" not in result.stdout + result.stderr
    home = isolated_state / "dagster_home"
    assert not any("hunter2" in p.read_text(errors="ignore") for p in home.rglob("*") if p.is_file())
