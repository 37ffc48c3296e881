"""``eval-pipeline compare``: two runtimes' latest runs side by side, and the cases that flip."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.run.pipeline import LaneRun

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
    assert (provenance["passed_a"], provenance["passed_b"]) == (True, False)
    # The nine pack_definition cases lose their gloss: 9 discordant pairs, all one way.
    dotted = metrics["no_dotted_inventory_rate"]
    assert (dotted["only_a"], dotted["only_b"], dotted["both"], dotted["neither"]) == (9, 0, 5, 1)
    assert dotted["p_value"] == 0.00390625 and dotted["method"] == "exact McNemar"
    assert dotted["verdict"] == "B worse" and dotted["ci_high"] < 0
    assert (dotted["rate_a"], dotted["rate_b"]) == (dotted["value_a"], dotted["value_b"])
    assert dotted["p_holm"] >= dotted["p_value"] and dotted["p_holm"] < 0.05
    placeholder = metrics["no_placeholder_rate"]  # nothing moved
    assert (placeholder["only_a"], placeholder["only_b"], placeholder["p_value"]) == (0, 0, 1.0)
    assert placeholder["verdict"] == "no detectable difference at α = 0.05, n = 15"
    cases = metrics["cases"]  # a count: shown, not tested
    assert (cases["value_a"], cases["delta"], cases["p_value"]) == (15, 0, None)
    assert cases["verdict"] == "not tested: not a rate"
    assert (doc["alpha"], doc["correction"], doc["resamples"]) == (0.05, "holm", 10_000)


def test_compare_by_run_ids_gives_the_same_document(targets: str) -> None:
    by_runtime = compare_json()
    code, output = invoke("--run", "run-g2", "--run", "run-n2", "--json")
    assert code == 0, output
    assert json.loads(output) == by_runtime
    code, output = invoke("--run", "run-g2", "--runtime", GLOSS)
    assert code == 2 and "not both" in output
    code, output = invoke("--run", "run-g2", "--run", "run-n2", "--split", "dev")
    assert code == 2 and "share no split 'dev'; they share public" in output
    code, output = invoke("--run", "run-g2")
    assert code == 2 and "give two runs (--run A --run B)" in output


def test_compare_table_output(targets: str) -> None:
    code, output = invoke("--runtime", GLOSS, "--runtime", NO_GLOSS)
    assert code == 0, output
    assert f"A: {GLOSS}  run run-g2 (2024-05-02)" in output and f"B: {NO_GLOSS}  run run-n2" in output
    assert re.search(r"no_dotted_inventory_rate\s+0\.9333\s+0\.3333\s+-0\.6\s+B worse", output)
    assert re.search(
        r"no_dotted_inventory_rate\s+9\s+0\s+\[-0\.867, -0\.333\]\s+0\.003906\s+0\.03516", output
    )
    assert "cases that flipped, A → B (27, each once)" in output
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


def test_a_five_sample_run_against_a_one_sample_run_lists_each_flip_once(history_root: Path) -> None:
    """Today's defect: 135 rows (each case × predicate five times, no sample index). Each flipped
    case predicate is listed once, with both runs' pass counts, and the rates are clustered."""
    from eval_pipeline.lanes import find_lane
    from eval_pipeline.run.pipeline import evaluate_lane
    from eval_pipeline.runtimes import build_runtime

    root = str(history_root)
    spec = find_lane(LANE)
    record_run(root, evaluate_lane(spec, SPLIT, build_runtime("reference"), repeat=5), RUNS[0])
    record_run(root, evaluate_lane(spec, SPLIT, build_runtime("reference:no-gloss")), RUNS[1])
    doc = compare_json()
    flips = doc["flips"]
    assert isinstance(flips, list) and len(flips) == len(FLIPPING_CASES) * len(FLIPPING_PREDICATES)
    assert {(f["passes_a"], f["samples_a"], f["passes_b"], f["samples_b"]) for f in flips} == {(5, 5, 0, 1)}
    dotted = next(m for m in doc["metrics"] if m["metric"] == "no_dotted_inventory_rate")  # type: ignore[union-attr]
    assert dotted["method"] == "clustered: bootstrap over cases" and dotted["only_a"] is None
    assert dotted["p_value"] < 0.05 and dotted["p_holm"] >= dotted["p_value"]
    assert (dotted["cases"], dotted["verdicts_a"], dotted["verdicts_b"]) == (15, 75, 15)
    assert dotted["verdict"] == "B worse" and dotted["ci_high"] < 0
    code, output = invoke("--runtime", GLOSS, "--runtime", NO_GLOSS)
    # Each flip's row on a line (both surfaces are printed under it), with both pass counts.
    assert code == 0 and re.search(
        r"fluency_truth_001 · no_dotted_inventory · change pass→fail · a ok 5/5 · b dotted_inventory 0/1",
        " ".join(output.split()),
    ), output
