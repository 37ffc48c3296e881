"""``evals/notify.yaml``: a bad file is bad input for ``validate`` (``file:line: field: message``,
exit 2); a good one loads, and its routes pick the channels that hear an event."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT
from eval_pipeline.notify import load_notify_config

runner = CliRunner()
GOOD = """\
channels:
  team: {format: slack, url_env: TEAM_HOOK}
  pager: {format: json, url_env: PAGER_HOOK}
routes:
  - {channel: team, events: [check_failed, regression, void, recovered], lanes: all}
  - channel: pager
    events: [check_failed]
    lanes: [refusal_calibration]
    runtimes: [reference]
    severity: [ERROR]
"""


def validate_problems(evals: Path, text: str) -> list[str]:
    (evals / "notify.yaml").write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["validate"])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    return [line for line in result.stderr.splitlines() if "notify.yaml:" in line]


def test_validate_reports_an_unknown_event_missing_url_env_and_unset_variable_with_file_and_line(
    evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAM_HOOK", raising=False)
    path = evals / "notify.yaml"
    problems = validate_problems(
        evals,
        "channels:\n"
        "  team: {format: slack, url_env: TEAM_HOOK}\n"
        "  pager: {format: json}\n"
        "routes:\n"
        "  - {channel: team, events: [check_failed, exploded]}\n",
    )
    assert any(p.startswith(f"{path}:3: channels.pager.url_env: Field required") for p in problems), problems
    assert any(p.startswith(f"{path}:5: routes[0].events[1]: Input should be") for p in problems), problems
    # the unset variable is reported once the file itself is valid
    monkeypatch.setenv("PAGER_HOOK", "http://127.0.0.1:9/")
    problems = validate_problems(evals, GOOD)
    assert problems == [f"{path}:2: channels.team.url_env: environment variable TEAM_HOOK is not set"]


def test_validate_reports_unknown_channels_lanes_and_runtimes(
    evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_HOOK", "http://127.0.0.1:9/")
    path = evals / "notify.yaml"
    assert validate_problems(evals, "routes:\n  - {channel: nobody, events: [void]}\n") == [
        f"{path}:2: routes[0].channel: no channel 'nobody' (none declared)"
    ]
    problems = validate_problems(
        evals,
        "channels: {team: {format: slack, url_env: TEAM_HOOK}}\n"
        "routes:\n"
        "  - channel: team\n"
        "    events: [void]\n"
        "    lanes: [no_such_lane]\n"
        "    runtimes: [reference, nowhere]\n",
    )
    assert [p.split(" (")[0] for p in problems] == [
        f"{path}:5: routes[0].lanes[0]: unknown lane 'no_such_lane'",
        f"{path}:6: routes[0].runtimes[1]: unknown runtime 'nowhere'",
    ]


def test_a_good_file_validates_and_routes_by_event_lane_runtime_and_severity(
    evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_HOOK", "http://127.0.0.1:9/")
    monkeypatch.setenv("PAGER_HOOK", "http://127.0.0.1:9/")
    (evals / "notify.yaml").write_text(GOOD, encoding="utf-8")
    result = runner.invoke(app, ["validate"])
    assert result.exit_code == 0, result.output
    config = load_notify_config(evals / "notify.yaml")
    assert config.channels_for("check_failed", "refusal_calibration", "reference", "ERROR") == [
        "team",
        "pager",
    ]
    assert config.channels_for("check_failed", "refusal_calibration", "reference", "WARN") == ["team"]
    assert config.channels_for("check_failed", "refusal_calibration", "staging", "ERROR") == ["team"]
    assert config.channels_for("void", "deterministic_fluency", "reference", "ERROR") == ["team"]
    assert config.channels_for("stale", "deterministic_fluency", "reference", "ERROR") == []  # not routed
