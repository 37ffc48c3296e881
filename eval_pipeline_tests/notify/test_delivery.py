"""Delivery to a real receiver on 127.0.0.1: retried with backoff, once per series, event and
night, and a failure is a warning naming what was not sent."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT, EXIT_CHECK_FAILED
from eval_pipeline.cli.notifier import sample_event
from eval_pipeline.notify import Ledger, NotifyConfig, dispatch, post_json
from eval_pipeline_tests.notify.conftest import Receiver

runner = CliRunner()
quick = partial(post_json, backoff_s=0.01)


def config() -> NotifyConfig:
    return NotifyConfig.model_validate(
        {
            "channels": {"team": {"format": "json", "url_env": "TEAM_HOOK"}},
            "routes": [{"channel": "team", "events": ["check_failed"]}],
        }
    )


def test_a_receiver_answering_500_three_times_then_200_gets_the_message_once(receiver: Receiver) -> None:
    receiver.statuses = [500, 503, 500]
    sleeps: list[float] = []
    delivered = post_json(receiver.url, {"event": "check_failed"}, sleep=sleeps.append)
    assert (delivered.ok, delivered.attempts) == (True, 4)
    assert receiver.attempts == 4 and receiver.bodies == [{"event": "check_failed"}]
    assert sleeps == [1.0, 2.0, 4.0]  # exponential backoff


def test_a_client_error_is_not_retried(receiver: Receiver) -> None:
    receiver.statuses = [404]
    delivered = quick(receiver.url, {"event": "void"})
    assert (delivered.ok, delivered.attempts, delivered.error) == (False, 1, "HTTP 404 Not Found")


def test_one_message_per_series_event_and_night_and_a_failure_is_a_warning(
    receiver: Receiver, closed_url: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    event = sample_event()
    down = dispatch([event], config(), ledger, environ={"TEAM_HOOK": closed_url}, post=quick)
    assert down.sent == [] and len(down.warnings) == 1
    assert down.warnings[0].startswith(
        f"not delivered: check_failed for {event.run.series.key} to channel 'team' after 4 attempt(s): connection failed"
    )
    assert closed_url not in down.warnings[0]  # the webhook URL is a secret
    unset = dispatch([event], config(), ledger, environ={}, post=quick)
    assert unset.warnings == [
        f"not sent: check_failed for {event.run.series.key} to channel 'team': environment variable TEAM_HOOK is not set"
    ]
    first = dispatch([event], config(), ledger, environ={"TEAM_HOOK": receiver.url}, post=quick)
    again = dispatch([event, event], config(), ledger, environ={"TEAM_HOOK": receiver.url}, post=quick)
    assert first.sent == [("team", "check_failed", event.run.series.key)]
    assert (again.sent, again.duplicates) == ([], 2)
    assert receiver.events() == ["check_failed"]


def test_notify_test_sends_a_sample_message(
    receiver: Receiver, closed_url: str, evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (evals / "notify.yaml").write_text(
        "channels:\n  team: {format: slack, url_env: TEAM_HOOK}\nroutes: []\n", encoding="utf-8"
    )
    monkeypatch.delenv("TEAM_HOOK", raising=False)
    unset = runner.invoke(app, ["notify", "test", "team"])
    assert unset.exit_code == EXIT_BAD_INPUT and "environment variable TEAM_HOOK is not set" in unset.stderr
    unknown = runner.invoke(app, ["notify", "test", "pager"])
    assert unknown.exit_code == EXIT_BAD_INPUT and "no channel 'pager'; channels: ['team']" in unknown.stderr
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    sent = runner.invoke(app, ["notify", "test", "team"])
    assert sent.exit_code == 0, sent.output
    assert "sent a sample message to channel 'team'" in sent.stdout
    (body,) = receiver.bodies
    assert body["text"].startswith(":red_circle: sample message") and body["blocks"][0]["type"] == "header"
    monkeypatch.setenv("TEAM_HOOK", closed_url)
    failed = runner.invoke(app, ["notify", "test", "team"])
    assert failed.exit_code == EXIT_CHECK_FAILED and "warning: notification not delivered" in failed.stderr
