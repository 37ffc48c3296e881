"""``run --runtime replay:FILE`` runs the lanes the file recorded, decided before anything runs."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT, EXIT_OK
from eval_pipeline.history.views import connect
from eval_pipeline.lanes import find_lane
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime

LANE, SPLIT = "deterministic_fluency", "public"


@pytest.fixture
def fluency_recording(tmp_path: Path) -> Path:
    """The reference runtime's answers to the fluency lane's public split, as a replay file."""
    turns = evaluate_lane(find_lane(LANE), SPLIT, build_runtime("reference")).transcripts
    path = tmp_path / "turns.jsonl"
    fields = ["case_id", "turn_index", "surface", "grounding_source"]
    path.write_text(
        "".join(json.dumps(row) + "\n" for row in turns[fields].to_dict("records")), encoding="utf-8"
    )
    return path


@pytest.fixture
def staging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where stage files are written: ``run`` writes every selected lane's cases stage before
    anything runs, and none of them may outlive the command, whether a run took it or not."""
    folder = tmp_path / "staging"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.slow
def test_without_lane_a_recording_runs_the_lanes_it_recorded(
    fluency_recording: Path, history_root: Path, staging: Path
) -> None:
    result = CliRunner().invoke(
        app, ["run", "--runtime", f"replay:{fluency_recording}"], env={"COLUMNS": "100"}
    )
    assert result.exit_code == EXIT_OK, result.output
    assert "1 lane run(s)" in result.stdout and f"{LANE} [{SPLIT}]" in result.stdout
    assert f"{fluency_recording} records no case of articulation_of_status [public]" in " ".join(
        result.stderr.split()
    )
    with connect(str(history_root)) as con:
        assert con.execute("SELECT lane FROM runs").fetchall() == [(LANE,)]
    assert list(staging.glob(".stage.*")) == []  # the lanes not run: their cases' files removed


def test_a_named_lane_the_recording_does_not_cover_is_bad_input_before_anything_runs(
    fluency_recording: Path, history_root: Path, staging: Path
) -> None:
    result = CliRunner().invoke(
        app, ["run", "--lane", "articulation_of_status", "--runtime", f"replay:{fluency_recording}"]
    )
    assert result.exit_code == EXIT_BAD_INPUT
    assert "records no turn of 12 of the 12 cases of articulation_of_status [public]" in " ".join(
        result.stderr.split()
    )
    assert not history_root.exists()
    assert list(staging.glob(".stage.*")) == []
