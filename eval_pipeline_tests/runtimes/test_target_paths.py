"""Every path a declared runtime target names stays inside the project (the folder holding
``evals/``), symbolic links followed, or it is bad input at its own file:line; a path the user
types on the command line (``--runtime replay:/abs/path``) is the user's own choice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT, EXIT_OK
from eval_pipeline.lanes.registry import discover_lanes
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.targets import TargetsFileError, load_targets
from eval_pipeline_tests.paths import PROJECT_ROOT

LANE = "deterministic_fluency"


def recording(path: Path) -> Path:
    """The reference runtime's answers to the lane's dev cases, as a replay file at ``path``."""
    spec = next(s for s in discover_lanes() if s.name == LANE)
    runtime = build_runtime("reference")
    try:
        turns = evaluate_lane(spec, "dev", runtime).transcripts
    finally:
        runtime.close()
    columns = ["case_id", "turn_index", "prompt", "surface", "grounding_source", "surface_tag"]
    rows = turns[columns].astype(object).where(turns[columns].notna(), None).to_dict("records")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def project_with_targets(root: Path, targets: str) -> Path:
    """A project folder (``root``) whose ``evals/`` holds the lane and ``targets`` as runtimes.yaml."""
    shutil.copytree(PROJECT_ROOT / "evals" / LANE, root / "evals" / LANE)
    (root / "evals" / "runtimes.yaml").write_text(targets, encoding="utf-8")
    return root / "evals" / "runtimes.yaml"


def test_every_path_a_target_names_outside_the_project_is_refused_at_its_line(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pack.json").write_text("{}", encoding="utf-8")
    project = tmp_path / "project"
    (project / "bots").mkdir(parents=True)
    (project / "bots" / "pack.json").symlink_to(outside / "pack.json")  # inside by name only
    (project / "recorded.jsonl").write_text("", encoding="utf-8")
    path = project_with_targets(
        project,
        "targets:\n"
        "  reference: {spec: reference}\n"
        f"  recorded: {{spec: 'replay:{project / 'recorded.jsonl'}'}}\n"
        f"  escaped: {{spec: 'replay:{project}/evals/../../outside/turns.jsonl'}}\n"
        "  bot:\n"
        "    spec: python:bots.bot:make\n"
        f"    options: {{paths: ['{project / 'bots'}', '{outside}']}}\n"
        "  child:\n"
        "    spec: exec:python3 bot.py\n"
        f"    options: {{cwd: '{outside}'}}\n"
        "  linked:\n"
        "    spec: reference\n"
        f"    options: {{pack: '{project / 'bots' / 'pack.json'}'}}\n",
    )
    with pytest.raises(TargetsFileError) as caught:
        load_targets(path)
    found = {(p.line, p.field): p.message for p in caught.value.problems}
    assert sorted(found) == [
        (4, "targets.escaped.spec"),
        (7, "targets.bot.options.paths[1]"),
        (10, "targets.child.options.cwd"),
        (13, "targets.linked.options.pack"),
    ], found
    assert all("leads outside the project" in message for message in found.values())
    assert (
        f"'{outside}' leads outside the project ({project.resolve()})"
        in found[(7, "targets.bot.options.paths[1]")]
    )


def test_the_command_line_refuses_a_declared_target_outside_the_project(tmp_path: Path) -> None:
    outside = recording(tmp_path / "outside" / "turns.jsonl")
    path = project_with_targets(
        tmp_path / "project",
        f"targets:\n  reference: {{spec: reference, nightly: true}}\n  recorded: {{spec: 'replay:{outside}'}}\n",
    )
    result = CliRunner().invoke(
        app,
        ["run", "--lane", LANE, "--split", "dev", "--runtime", "recorded"],
        env={"EVAL_PIPELINE_EVALS": str(path.parent), "COLUMNS": "200"},
    )
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert f"{path}:3: targets.recorded.spec: '{outside}' leads outside the project" in result.output


def test_a_replay_path_typed_on_the_command_line_is_the_users_choice(tmp_path: Path) -> None:
    outside = recording(tmp_path / "turns.jsonl")
    assert not outside.resolve().is_relative_to(PROJECT_ROOT.resolve())
    result = CliRunner().invoke(
        app, ["run", "--lane", LANE, "--split", "dev", "--runtime", f"replay:{outside}", "--json"]
    )
    assert result.exit_code == EXIT_OK, result.output
    (lane,) = json.loads(result.stdout)["lanes"]
    assert lane["runtime"].startswith("replay-") and lane["void"] is False
