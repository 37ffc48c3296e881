"""``compare`` of two commits of a framework lane: each commit is its own series, the runner
changed between them, and the paired comparison reads each run's own history and names the
cases that flipped; the lane's stated thresholds are Dagster checks on each run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_CHECK_FAILED
from eval_pipeline_tests.frameworks.test_framework_lanes import import_lanes, lane_yaml, run, write_lane_yaml
from eval_pipeline_tests.frameworks.test_framework_nightly import committed

pytestmark = pytest.mark.slow

LANE = "fix_greeting_chat"
THRESHOLDS = [
    {"metric": "greet_rate", "op": ">=", "value": 0.7, "severity": "ERROR", "reason": "most greet"},
    {"metric": "polite_rate", "op": ">=", "value": 0.6, "severity": "WARN", "reason": "most are polite"},
]
# Commit B's runner: "!" prompts greet again (g2 passes), prompts starting A or E do not (g1, g4 fail).
BEFORE, AFTER = 'prompt.startswith("!")', 'prompt.startswith(("A", "E"))'
# The case rows that flip from A to B: greeted (hard) and polite (report) of each warm case.
FLIPS = {
    ("g1", "greeted", "pass→fail"),
    ("g1", "polite", "pass→fail"),
    ("g4", "greeted", "pass→fail"),
    ("g4", "polite", "pass→fail"),
    ("g2", "greeted", "fail→pass"),
    ("g2", "polite", "fail→pass"),
}


def stored_metric(lane: str, metric: str) -> dict[str, float]:
    """``metric`` of every run of ``lane`` as history holds it, by run id."""
    result = CliRunner().invoke(app, ["history", "--lane", lane, "--metric", metric, "--format", "json"])
    assert result.exit_code == 0, result.output
    return {row["run_id"]: row["value"] for row in json.loads(result.stdout)}


def dagster_checks(run_id: str) -> dict[str, bool]:
    """The asset check evaluations the Dagster instance holds for the run: passed, by name."""
    logs = dg.DagsterInstance.get().all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    evaluations = [entry.dagster_event.asset_check_evaluation_data for entry in logs if entry.dagster_event]
    return {evaluation.check_name: evaluation.passed for evaluation in evaluations}


def test_compare_of_two_commits_reads_each_commits_run_and_names_the_flipped_cases(
    project: Path, tmp_path: Path
) -> None:
    import_lanes()
    chat = lane_yaml(project, LANE)
    chat["runner"].update(
        case_rows={"hard": ["greeted"], "report": ["polite"]},
        metrics={"greet_rate": {"rate_of": "greeted"}, "polite_rate": {"rate_of": "polite"}},
    )
    chat["thresholds"] = THRESHOLDS
    write_lane_yaml(project, LANE, chat)
    checkout = tmp_path / "checkout"
    first = committed(checkout, "A")
    code_a, document_a = run("--lane", LANE, "--split", "dev", "--date", "2026-11-27")
    runner = checkout / "evals/greeting_chat/runner.py"
    source = runner.read_text(encoding="utf-8")
    assert BEFORE in source
    runner.write_text(source.replace(BEFORE, AFTER), encoding="utf-8")
    second = committed(checkout, "B")
    code_b, document_b = run("--lane", LANE, "--split", "dev", "--date", "2026-11-28")
    (lane_a,), (lane_b,) = document_a["lanes"], document_b["lanes"]
    name_a, name_b = f"fix-{first[:12]}", f"fix-{second[:12]}"
    assert (lane_a["runtime"], lane_b["runtime"]) == (name_a, name_b)  # a series per commit
    assert (code_a, code_b) == (0, EXIT_CHECK_FAILED)

    # the stated thresholds are checks of each run: the stored outcome's and Dagster's agree
    verdicts = {"greet_rate": ("pass", "fail"), "polite_rate": ("pass", "warn")}
    for side, lane in enumerate((lane_a, lane_b)):
        stored = {c["name"]: c for c in lane["checks"]}
        assert {name: stored[name]["verdict"] for name in verdicts} == {
            name: pair[side] for name, pair in verdicts.items()
        }
        in_dagster = dagster_checks(lane["run_id"])
        assert {name: in_dagster[name] for name in verdicts} == {
            name: stored[name]["passed"] for name in verdicts
        }

    result = CliRunner().invoke(
        app, ["compare", "--lane", LANE, "--runtime", name_a, "--runtime", name_b, "--json"]
    )
    assert result.exit_code == 0, result.output
    compared = json.loads(result.stdout)
    assert (compared["a"]["runtime"], compared["a"]["run_id"]) == (name_a, lane_a["run_id"])
    assert (compared["b"]["runtime"], compared["b"]["run_id"]) == (name_b, lane_b["run_id"])
    greet_history = stored_metric(LANE, "greet_rate")
    polite_history = stored_metric(LANE, "polite_rate")
    metrics = {m["metric"]: m for m in compared["metrics"]}
    for metric, history in (("greet_rate", greet_history), ("polite_rate", polite_history)):
        figures = metrics[metric]
        assert (figures["value_a"], figures["value_b"]) == (
            history[lane_a["run_id"]],
            history[lane_b["run_id"]],
        )
    assert (greet_history[lane_a["run_id"]], greet_history[lane_b["run_id"]]) == (0.75, 0.5)
    greet = metrics["greet_rate"]
    # g3 passes in both, g1 and g4 only in A, g2 only in B
    assert (greet["both"], greet["only_a"], greet["only_b"], greet["neither"]) == (1, 2, 1, 0)
    assert (greet["passed_a"], greet["passed_b"]) == (True, False)
    assert {(f["case_id"], f["predicate"], f["change"]) for f in compared["flips"]} == FLIPS

    text = CliRunner().invoke(
        app, ["compare", "--lane", LANE, "--runtime", name_a, "--runtime", name_b, "--wide"]
    )
    assert text.exit_code == 0, text.output
    assert f"A: {name_a}  run {lane_a['run_id']}" in text.output
    assert f"B: {name_b}  run {lane_b['run_id']}" in text.output
    value_a, value_b = greet_history[lane_a["run_id"]], greet_history[lane_b["run_id"]]
    assert re.search(rf"\n\s*greet_rate\s+{value_a:g}\s+{value_b:g}\s", text.output), text.output
    assert "cases that flipped, A → B (6, each once)" in text.output
    lines = text.output.splitlines()
    for case, predicate, change in FLIPS:
        said = [line for line in lines if f"{case} · {predicate} · change {change}" in line]
        assert len(said) == 1, (case, predicate, change)
