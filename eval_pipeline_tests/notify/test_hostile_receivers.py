"""Webhooks trust neither the URL nor the receiver: only http(s) URLs pass ``validate`` and are
posted to, a redirect is a failed delivery (never recorded as sent), an answer is read up to a
small cap, a delivery ends by its deadline however slowly the receiver answers, and no failure
quotes the URL or changes a run's exit code."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT, EXIT_CHECK_FAILED
from eval_pipeline.cli.notifier import sample_event
from eval_pipeline.dagster_wiring.launch import ensure_instance
from eval_pipeline.notify import Ledger, NotifyConfig, dispatch, post_json
from eval_pipeline.notify.delivery import MAX_RESPONSE_BYTES, webhook_url_problem
from eval_pipeline_tests.notify.conftest import Receiver
from eval_pipeline_tests.notify.hostile_receivers import (
    Served,
    answer,
    drip,
    hostile_receiver,
    huge_body,
    redirect_to,
    send,
    silence,
)
from eval_pipeline_tests.notify.test_notify_sensor import nightly_run, tick
from eval_pipeline_tests.notify.test_run_notify import NOTIFY, staging

runner = CliRunner()
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
BAD_URLS = [
    "hooks.example.com/services/T0/B0/s3cr3t",
    "hooks.example.com:443/services/s3cr3t",
    "http://hooks.example.com:port/s3cr3t",
    "http://hooks.example.com/a s3cr3t",
    "file:///etc/passwd",
    "ftp://hooks.example.com/s3cr3t",
    "http:///s3cr3t",
    "http://[::1/s3cr3t",
]


def config() -> NotifyConfig:
    return NotifyConfig.model_validate(
        {
            "channels": {"team": {"format": "json", "url_env": "TEAM_HOOK"}},
            "routes": [{"channel": "team", "events": ["check_failed"]}],
        }
    )


@pytest.mark.parametrize("url", BAD_URLS)
def test_only_an_http_url_is_posted_to(url: str) -> None:
    problem = webhook_url_problem(url)
    assert problem is not None and problem.startswith("expected an http:// or https:// URL")
    assert "s3cr3t" not in problem and "passwd" not in problem
    delivered = post_json(url, {"event": "void"})
    assert (delivered.ok, delivered.attempts, delivered.error) == (False, 0, problem)


def test_validate_refuses_a_channel_whose_url_is_not_http(
    evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (evals / "notify.yaml").write_text(
        "channels:\n  team:\n    format: slack\n    url_env: TEAM_HOOK\nroutes: []\n", encoding="utf-8"
    )
    for url in BAD_URLS:
        monkeypatch.setenv("TEAM_HOOK", url)
        result = runner.invoke(app, ["validate"])
        assert result.exit_code == EXIT_BAD_INPUT, (url, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert (
            f"{evals / 'notify.yaml'}:4: channels.team.url_env: environment variable TEAM_HOOK: expected an http"
            in (" ".join(result.stderr.split()))
        ), result.stderr
        assert "s3cr3t" not in result.output and "passwd" not in result.output
    monkeypatch.setenv("TEAM_HOOK", "https://hooks.example.com/services/s3cr3t")
    assert runner.invoke(app, ["validate"]).exit_code == 0


def test_a_redirect_is_a_failed_delivery_never_recorded_as_sent(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    event = sample_event()
    for status in (301, 302, 303, 307, 308):
        with (
            hostile_receiver(answer(OK)) as elsewhere,  # another host, answering anything with 200
            hostile_receiver(redirect_to(elsewhere.url, status)) as redirecting,
        ):
            done = dispatch([event], config(), ledger, environ={"TEAM_HOOK": redirecting.url})
        assert done.sent == [] and len(done.warnings) == 1, done
        assert f"after 1 attempt(s): HTTP {status} Moved: redirects are not followed" in done.warnings[0]
        assert redirecting.url not in done.warnings[0] and "s3cr3t" not in done.warnings[0]
        assert not ledger.sent("team", event.dedup_key)
        assert elsewhere.requests == []  # the POST never went where the receiver pointed


def test_an_answer_is_read_up_to_a_small_cap() -> None:
    length = 256 << 20
    with hostile_receiver(huge_body(length)) as huge:
        started = time.monotonic()
        delivered = post_json(huge.url, {"event": "void"}, deadline_s=20)
        seconds = time.monotonic() - started
        time.sleep(0.2)  # the receiver notices the hang-up
    assert delivered.ok and delivered.attempts == 1, delivered
    # What the client took is its cap plus what the sockets' buffers held, not the body.
    assert huge.bytes_sent < 32 << 20 and MAX_RESPONSE_BYTES < 32 << 20, huge.bytes_sent
    assert seconds < 10


def test_a_dripping_receiver_cannot_outlast_the_deadline() -> None:
    """A byte every second keeps every socket read inside its timeout: only the delivery's own
    deadline ends it."""
    with hostile_receiver(drip(1.0)) as slow:
        started = time.monotonic()
        delivered = post_json(slow.url, {"event": "void"}, timeout_s=10, deadline_s=2.5, backoff_s=0.01)
        seconds = time.monotonic() - started
    assert not delivered.ok and delivered.error.startswith("no complete answer within"), delivered
    assert seconds < 4, seconds


def test_a_receiver_that_accepts_then_stalls_got_the_message_once() -> None:
    def accept_then_stall(conn: socket.socket, served: Served) -> None:
        send(conn, served, b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nok")
        silence(conn, served)

    with hostile_receiver(accept_then_stall) as stalling:
        started = time.monotonic()
        delivered = post_json(stalling.url, {"event": "void"}, deadline_s=2, backoff_s=0.01)
        seconds = time.monotonic() - started
    assert (delivered.ok, delivered.attempts, len(stalling.requests)) == (True, 1, 1), delivered
    assert seconds < 4, seconds


@pytest.mark.slow
def test_a_run_with_an_unusable_webhook_keeps_its_exit_code_and_the_secret(
    evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (evals / "notify.yaml").write_text(
        "channels:\n  team: {format: slack, url_env: TEAM_HOOK}\n"
        "routes:\n  - {channel: team, events: [check_failed], lanes: all}\n",
        encoding="utf-8",
    )
    failing = ["run", "--lane", "refusal_calibration", "--split", "dev", "--runtime", "reference:no-refusal"]
    for url in (BAD_URLS[0], BAD_URLS[2], BAD_URLS[4]):
        monkeypatch.setenv("TEAM_HOOK", url)
        result = runner.invoke(app, [*failing, "--notify"])
        assert result.exception is None or isinstance(result.exception, SystemExit), (url, result.exception)
        assert result.exit_code == EXIT_CHECK_FAILED, (url, result.output)  # the check failed: that, no more
        assert "warning: notification not sent: check_failed" in result.stderr, result.stderr
        assert "s3cr3t" not in result.output and "passwd" not in result.output, result.output


@pytest.mark.slow
def test_the_sensor_counts_a_redirect_as_not_sent_and_sends_again_later(
    receiver: Receiver, evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (evals / "notify.yaml").write_text(NOTIFY, encoding="utf-8")
    staging(evals, "reference:no-refusal")
    instance = ensure_instance()
    failing = nightly_run(instance, "2026-11-27")
    with (
        hostile_receiver(answer(OK)) as elsewhere,
        hostile_receiver(redirect_to(elsewhere.url)) as redirecting,
    ):
        monkeypatch.setenv("TEAM_HOOK", redirecting.url)
        message, _ = tick(instance, None)
    assert len(redirecting.requests) == 1 and elsewhere.requests == []
    assert "0 message(s) sent" in message, message
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    message, _ = tick(instance, None)  # the ledger did not record the redirect as sent
    assert [(b["event"], b["run_id"]) for b in receiver.bodies] == [("check_failed", failing)]
    assert "1 message(s) sent" in message, message
