"""A recording (``history:``, ``replay:``) is sent nothing: it keeps no journal and spends no
budget, and says so when asked to resume; a live runtime's run journals every session and
leaves no journal once it commits."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline_tests.resume.helpers import journals

LANE = "deterministic_fluency"


def test_a_recording_keeps_no_journal_and_spends_no_budget(isolated_state: Path) -> None:
    live = CliRunner().invoke(app, ["run", "--lane", LANE, "--split", "dev", "--json"])
    assert live.exit_code == 0, live.output
    assert journals(isolated_state) == []  # committed: its journal is gone
    (lane,) = json.loads(live.stdout)["lanes"]
    assert lane["journal"] == ""

    rescored = CliRunner().invoke(
        app, ["run", "--runtime", f"history:{lane['run_id']}", "--resume", "--max-turns", "1", "--json"]
    )
    assert rescored.exit_code == 0, rescored.output  # one turn of budget: a recording spends none
    (again,) = json.loads(rescored.stdout)["lanes"]
    assert again["journal"] == "" and again["void"] is False
    assert journals(isolated_state) == []
    assert not (
        isolated_state / "dagster_home" / "storage" / "journal" / LANE / "dev" / again["runtime"]
    ).exists()
