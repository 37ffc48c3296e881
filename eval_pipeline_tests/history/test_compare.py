"""``eval-pipeline compare``: two runtimes' latest runs side by side, and the cases that flip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.intervals import wilson_interval
from eval_pipeline.pipeline import LaneRun

from .conftest import FLIPPING_CASES, FLIPPING_PREDICATES, LANE, SPLIT, StoredRun, record_run

runner = CliRunner()
GLOSS, NO_GLOSS = "reference", "reference-no-gloss"
RUNS = (
    StoredRun("run-g1", GLOSS, "2024-05-01", True),
    StoredRun("run-n1", NO_GLOSS, "2024-05-01", False),
    StoredRun("run-g2", GLOSS, "2024-05-02", True),
    StoredRun("run-n2", NO_GLOSS, "2024-05-02", False),
    # A later --cases run of the glossed target: another series, never the default.
    StoredRun("run-gc", GLOSS, "2024-05-03", False, case_set="custom-99aa", cases_sha256="9" * 64),
)
# What a no-gloss runtime's failure is called, per predicate.
NO_GLOSS_CODES = {
    "no_provenance_only": "provenance_only",
    "no_dotted_inventory": "dotted_inventory",
    "post_gloss_predicates": "contract_failed",
}


@pytest.fixture
def targets(history_root: Path, lane_runs: dict[bool, LaneRun]) -> str:
    root = str(history_root)
    for stored in RUNS:
        record_run(root, lane_runs[stored.glossed], stored)
    return root


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["compare", "--lane", LANE, *args], env={"COLUMNS": "250"})
    return result.exit_code, result.output


def compare_json(*args: str) -> dict[str, object]:
    code, output = invoke("--runtime", GLOSS, "--runtime", NO_GLOSS, "--json", *args)
    assert code == 0, output
    document = json.loads(output)
    assert isinstance(document, dict)
    return document


def test_compare_shows_the_gloss_lift_case_by_case(targets: str) -> None:
    doc = compare_json()
    assert (doc["split"], doc["case_set"], doc["note"]) == (SPLIT, SPLIT, None)
    assert (doc["a"]["run_id"], doc["b"]["run_id"]) == ("run-g2", "run-n2")  # type: ignore[index]
    flips = doc["flips"]
    assert isinstance(flips, list)
    assert {(f["case_id"], f["predicate"]) for f in flips} == {
        (c, p) for c in FLIPPING_CASES for p in FLIPPING_PREDICATES
    }
    assert {(f["predicate"], f["code_a"], f["code_b"], f["change"]) for f in flips} == {
        (p, "ok", code, "pass→fail") for p, code in NO_GLOSS_CODES.items()
    }
    truth = next(f for f in flips if f["case_id"] == "fluency_truth_001")
    assert truth["surface_a"].startswith("Truth is") and truth["surface_b"].startswith(
        "truth — pack-grounded"
    )
    metrics = {m["metric"]: m for m in doc["metrics"]}  # type: ignore[union-attr]
    provenance = metrics["no_provenance_only_rate"]
    assert (provenance["numerator_a"], provenance["denominator_a"]) == (14, 15)
    assert (provenance["numerator_b"], provenance["denominator_b"]) == (5, 15)
    assert provenance["delta"] == pytest.approx(5 / 15 - 14 / 15)
    for side, numerator in (("a", 14), ("b", 5)):
        low, high = wilson_interval(numerator, 15) or (0, 0)
        assert provenance[f"wilson_low_{side}"] == pytest.approx(low)
        assert provenance[f"wilson_high_{side}"] == pytest.approx(high)
    assert (provenance["passed_a"], provenance["passed_b"]) == (True, False)
    cases = metrics["cases"]  # a count: no interval
    assert (cases["value_a"], cases["wilson_low_a"], cases["delta"]) == (15, None, 0)


def test_compare_table_output(targets: str) -> None:
    code, output = invoke("--runtime", GLOSS, "--runtime", NO_GLOSS)
    assert code == 0, output
    assert f"A: {GLOSS}  run run-g2 (2024-05-02)" in output and f"B: {NO_GLOSS}  run run-n2" in output
    low, high = wilson_interval(14, 15) or (0, 0)
    assert "0.9333  14/15 " in output and f"[{low:.3f}, {high:.3f}]" in output and "-0.6" in output
    assert f"cases that flip, A={GLOSS} → B={NO_GLOSS} (27)" in output
    assert "provenance_only" in output and "dotted_inventory" in output


def test_compare_refuses_what_history_does_not_hold(targets: str) -> None:
    code, output = invoke("--runtime", GLOSS, "--runtime", "gpt-9")
    assert code == 2 and f"has no runs of runtime 'gpt-9'; runtimes with runs: {GLOSS}, {NO_GLOSS}" in output
    result = runner.invoke(app, ["compare", "--lane", "nope", "--runtime", "a", "--runtime", "b"])
    assert result.exit_code == 2
    assert f"no committed runs of lane 'nope' in history; lanes with runs: {LANE}" in result.output
    code, output = invoke("--runtime", GLOSS)
    assert code == 2 and "give two different runtimes" in output
    code, output = invoke("--runtime", GLOSS, "--runtime", NO_GLOSS, "--case-set", "custom-99aa")
    assert code == 2 and "not both runtimes ran case set 'custom-99aa'" in output
    assert f"'{GLOSS}' has custom-99aa, public, '{NO_GLOSS}' has public" in output


def test_compare_default_split(targets: str, lane_runs: dict[bool, LaneRun]) -> None:
    for stored in (
        StoredRun("run-gp", GLOSS, "2024-05-04", True, split="private", case_set="private"),
        StoredRun("run-np", NO_GLOSS, "2024-05-04", False, split="private", case_set="private"),
    ):
        record_run(targets, lane_runs[stored.glossed], stored)
    code, output = invoke("--runtime", GLOSS, "--runtime", NO_GLOSS)
    assert code == 2 and "share several splits, give --split: one of private, public" in output
    doc = compare_json("--split", "private")
    assert (doc["a"]["run_id"], doc["b"]["run_id"]) == ("run-gp", "run-np")  # type: ignore[index]
    code, output = invoke("--runtime", GLOSS, "--runtime", NO_GLOSS, "--split", "holdout")
    assert code == 2 and f"'{GLOSS}' has private, public, '{NO_GLOSS}' has private, public" in output
