"""``eval-pipeline run --notify`` through the real pipeline, to a real receiver: a failing run,
the same night again (nothing new), a recovery, a void run, and a receiver that is down (the
run's result unchanged, a warning)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, EXIT_VOID
from eval_pipeline_tests.notify.conftest import Receiver

runner = CliRunner()
LANE = ["--lane", "refusal_calibration", "--split", "dev", "--runtime", "staging"]
NOTIFY = """\
channels:
  team: {format: json, url_env: TEAM_HOOK}
routes:
  - {channel: team, events: [check_failed, regression, void, recovered], lanes: [refusal_calibration]}
"""


def staging(evals: Path, spec: str, options: str = "{}") -> None:
    """Point the declared target ``staging`` at ``spec``: its series stays the same."""
    (evals / "runtimes.yaml").write_text(
        f"targets:\n  reference: {{spec: reference, nightly: true}}\n"
        f"  staging: {{spec: '{spec}', options: {options}}}\n",
        encoding="utf-8",
    )


def run(night: str, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["run", *LANE, "--date", night, *extra])
    return result.exit_code, result.stderr


@pytest.mark.slow
def test_run_notify_sends_each_event_once_and_a_failed_delivery_changes_nothing(
    receiver: Receiver, closed_url: str, evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (evals / "notify.yaml").write_text(NOTIFY, encoding="utf-8")
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    monkeypatch.setenv("EVAL_PIPELINE_VIEWER_URL", "http://viewer.test")
    staging(evals, "reference:no-refusal")

    code, stderr = run("2026-11-27", "--notify")
    assert code == EXIT_CHECK_FAILED, stderr
    (failed,) = receiver.bodies
    assert failed["event"] == "check_failed" and failed["severity"] == "ERROR"
    assert failed["series"] == "refusal_calibration/dev/staging/dev" and failed["night"] == "2026-11-27"
    assert {c["name"] for c in failed["checks"]} >= {"fabrication_rate"}
    assert all(c["threshold"] and not c["passed"] for c in failed["checks"])
    assert failed["failing_cases"] and all(c["reason"] for c in failed["failing_cases"])
    assert failed["links"]["viewer_run"] == f"http://viewer.test/runs/{failed['run_id']}"
    assert "notifications: 1 sent" in stderr

    code, stderr = run("2026-11-27", "--notify")  # the same night again: no second message
    assert code == EXIT_CHECK_FAILED and len(receiver.bodies) == 1
    assert "0 sent; 1 already sent tonight" in stderr

    staging(evals, "reference")
    code, stderr = run("2026-11-28", "--notify")
    assert code == EXIT_OK, stderr
    assert [b["event"] for b in receiver.bodies] == ["check_failed", "recovered"]
    assert receiver.bodies[1]["failing_cases"] == [] and receiver.bodies[1]["night"] == "2026-11-28"

    staging(evals, "openai:" + closed_url.removesuffix("/hook") + "/v1", "{model: m, max_retries: 0}")
    code, stderr = run("2026-11-29", "--notify")
    assert code == EXIT_VOID, stderr
    assert [b["event"] for b in receiver.bodies] == ["check_failed", "recovered", "void"]
    assert receiver.bodies[2]["checks"][0]["name"] == "measurement"

    staging(evals, "reference:no-refusal")
    monkeypatch.setenv("TEAM_HOOK", closed_url)
    code, stderr = run("2026-11-30", "--notify")
    assert code == EXIT_CHECK_FAILED  # what the run says, delivered or not
    assert (
        "warning: notification not delivered: check_failed for refusal_calibration/dev/staging/dev" in stderr
    )
    monkeypatch.delenv("TEAM_HOOK")
    code, stderr = run("2026-11-30", "--notify", "--json")
    assert code == EXIT_CHECK_FAILED
    assert "environment variable TEAM_HOOK is not set" in stderr
    assert len(receiver.bodies) == 3


def test_run_notify_without_a_notify_file_or_with_a_bad_one_is_bad_input_and_runs_nothing(
    evals: Path, history_root: Path
) -> None:
    staging(evals, "reference")
    code, stderr = run("2026-11-27", "--notify")
    assert code == EXIT_BAD_INPUT and "notify.yaml" in stderr
    (evals / "notify.yaml").write_text("channels: {team: {format: teams, url_env: X}}\n", encoding="utf-8")
    code, stderr = run("2026-11-27", "--notify")
    assert code == EXIT_BAD_INPUT
    assert f"{evals / 'notify.yaml'}:1: channels.team.format: Input should be 'slack' or 'json'" in stderr
    assert not history_root.exists() or not any(history_root.rglob("*.parquet"))
