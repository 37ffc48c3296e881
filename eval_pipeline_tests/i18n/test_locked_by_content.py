"""The few-shot guard knows locked cases by content: another path to the same case is refused."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT
from eval_pipeline.i18n.prompts import LockedSplitError
from eval_pipeline.lanes import find_lane
from eval_pipeline.lanes.kinds.i18n_prompt import few_shot_pool
from eval_pipeline_tests.paths import PROJECT_ROOT


@pytest.fixture
def lane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "evals" / "i18n-prompt"
    shutil.copytree(PROJECT_ROOT / "evals" / "i18n-prompt", folder)
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(folder.parent))
    return folder


def _list_under_dev(folder: Path, relative: str) -> None:
    manifest = folder / "manifest.yaml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace(
            "    - cases/dev/length.jsonl\n", f"    - cases/dev/length.jsonl\n    - {relative}\n", 1
        ),
        encoding="utf-8",
    )


def test_a_hard_link_to_the_locked_file_listed_under_dev_is_refused(lane: Path) -> None:
    locked = lane / "cases" / "locked" / "cases.jsonl"
    os.link(locked, lane / "cases" / "dev" / "more.jsonl")
    assert (lane / "cases" / "dev" / "more.jsonl").stat().st_ino == locked.stat().st_ino
    _list_under_dev(lane, "cases/dev/more.jsonl")
    with pytest.raises(LockedSplitError, match=r"more\.jsonl:1: case .* is locked case"):
        few_shot_pool(find_lane("i18n_prompt"), "dev")
    result = CliRunner().invoke(app, ["run", "--lane", "i18n_prompt", "--split", "dev"])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "holds locked cases" in result.stderr


def test_a_locked_case_copied_under_another_id_is_refused_by_its_text(lane: Path) -> None:
    locked = lane / "cases" / "locked" / "cases.jsonl"
    case = json.loads(locked.read_text(encoding="utf-8").splitlines()[1])
    case["id"] = "placeholder.printf.900"
    case["source"] = f"  {case['source']} "  # surrounding whitespace does not make it another text
    (lane / "cases" / "dev" / "copy.jsonl").write_text(json.dumps(case) + "\n", encoding="utf-8")
    _list_under_dev(lane, "cases/dev/copy.jsonl")
    with pytest.raises(
        LockedSplitError, match=r"copy\.jsonl:1: case 'placeholder\.printf\.900' is locked case"
    ):
        few_shot_pool(find_lane("i18n_prompt"), "dev")
    result = CliRunner().invoke(app, ["validate"])
    assert result.exit_code == EXIT_BAD_INPUT and "holds locked cases" in result.stderr


def test_the_shipped_dev_split_shares_nothing_with_the_locked_one() -> None:
    assert few_shot_pool(find_lane("i18n_prompt"), "dev").split == "dev"
