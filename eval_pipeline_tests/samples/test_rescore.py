"""``history:RUN_ID`` re-scores a committed run without calling its runtime: the same tables when
nothing changed, and different exactly where a changed predicate says, in a series of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.runtimes.targets import rescore_name
from eval_pipeline_tests.metric_tables import without_timings

pytestmark = pytest.mark.slow
RUN_COLUMNS = ["run_id", "runtime"]


def run_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["run", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["lanes"][0]


def rows(lane: dict[str, Any], table: str) -> pd.DataFrame:
    frame = pd.DataFrame(lane[table]).drop(columns=RUN_COLUMNS)
    return frame.sort_values(["case_id", "sample_index", "predicate"]).reset_index(drop=True)


def test_a_rescore_reproduces_the_run_and_moves_only_what_a_changed_predicate_moves(
    sampled_evals: Path,
) -> None:
    recorded = run_json("--runtime", "coin", "--repeat", "3", "--seed", "5")
    run_id = recorded["run_id"]

    same = run_json("--runtime", f"history:{run_id[:8]}")
    assert same["runtime"] == rescore_name(run_id) and same["lane"] == "sampled" and same["split"] == "dev"
    pd.testing.assert_frame_equal(rows(same, "case_predicates"), rows(recorded, "case_predicates"))
    pd.testing.assert_frame_equal(rows(same, "turn_predicates"), rows(recorded, "turn_predicates"))
    assert without_timings(same["metrics"]) == without_timings(
        recorded["metrics"]
    )  # a re-score times nothing
    assert [c["verdict"] for c in same["checks"]] == [c["verdict"] for c in recorded["checks"]]

    # The contract changes: the rate now reads whether the answer has a finite verb (every
    # answer of the bot does), so exactly the rows that failed on punctuation now pass.
    lane_file = sampled_evals / "sampled" / "lane.yaml"
    lane_file.write_text(
        lane_file.read_text().replace("complete_punctuation", "finite_predicate_shape"), encoding="utf-8"
    )
    changed = run_json("--runtime", f"history:{run_id}")
    assert changed["runtime"] == rescore_name(run_id)
    before, after = rows(recorded, "case_predicates"), rows(changed, "case_predicates")
    assert after["passed"].all()
    keys = ["case_id", "sample_index"]
    moved = after.merge(before, on=keys, suffixes=("", "_before"))
    assert len(moved) == len(before)
    flipped = moved[moved["passed"] != moved["passed_before"]]
    assert len(flipped) == int((~before["passed"]).sum()) > 0
    assert changed["metrics"]["punctuation_rate"] == 1.0 > recorded["metrics"]["punctuation_rate"]

    result = CliRunner().invoke(
        app,
        ["compare", "--lane", "sampled", "--runtime", "coin", "--runtime", rescore_name(run_id), "--json"],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    text = json.dumps(document)
    assert "punctuation_rate" in text and rescore_name(run_id) in text


def test_a_rescore_of_an_unknown_run_is_bad_input(sampled_evals: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--runtime", "history:ffffffff"])
    assert result.exit_code == 2
    assert "history:ffffffff" in result.output and "no run" in result.output


def test_a_rescore_reads_the_run_from_the_history_root_the_command_line_names(
    sampled_evals: Path, tmp_path: Path
) -> None:
    elsewhere = str(tmp_path / "elsewhere")  # not $EVAL_PIPELINE_HISTORY
    recorded = run_json("--runtime", "coin", "--history", elsewhere)
    same = run_json("--runtime", f"history:{recorded['run_id'][:8]}", "--history", elsewhere)
    assert same["runtime"] == rescore_name(recorded["run_id"])
    assert without_timings(same["metrics"]) == without_timings(
        recorded["metrics"]
    )  # a re-score times nothing
