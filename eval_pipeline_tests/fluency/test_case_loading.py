"""Case files: every problem reported with file, line and field, all at once; duplicates rejected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.cases import CaseFileError, load_cases
from eval_pipeline.lanes import discover_lanes, find_lane, lane_kind
from eval_pipeline.run.pipeline import load_split

FluencyCase = lane_kind(find_lane("deterministic_fluency")).case_model

GOOD = {
    "id": "fluency_truth_001",
    "prompt": "What is truth?",
    "category": "pack_definition",
    "expected_predicates": ["no_placeholder"],
}


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_every_problem_of_a_file_is_reported_with_line_and_field(tmp_path: Path) -> None:
    bad_predicate = {**GOOD, "id": "b", "expected_predicates": ["no_such_predicate"]}
    missing_prompt = {k: v for k, v in GOOD.items() if k != "prompt"} | {"id": "c"}
    unknown_field = {**GOOD, "id": "d", "colour": "blue"}
    path = write(
        tmp_path / "cases.jsonl",
        [
            json.dumps(GOOD),
            "{not json",
            json.dumps(bad_predicate),
            "",
            json.dumps(missing_prompt),
            json.dumps(unknown_field),
            "[1, 2]",
        ],
    )
    with pytest.raises(CaseFileError) as caught:
        load_cases([path], FluencyCase)
    problems = {(p.line, p.field) for p in caught.value.problems}
    assert problems == {
        (2, "(line)"),
        (3, "expected_predicates[0]"),
        (5, "prompt"),
        (6, "colour"),
        (7, "(line)"),
    }
    text = str(caught.value)
    assert f"{path}:5: prompt: required field is missing" in text
    assert "unknown field" in text
    assert "no_such_predicate" in text  # says what it got, and what was expected
    assert "no_placeholder" in text


def test_duplicate_ids_are_rejected_across_files(tmp_path: Path) -> None:
    first = write(tmp_path / "a.jsonl", [json.dumps(GOOD)])
    second = write(tmp_path / "b.jsonl", [json.dumps({**GOOD, "prompt": "What is doubt?"})])
    with pytest.raises(CaseFileError) as caught:
        load_cases([first, second], FluencyCase)
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.field) == (str(second), 1, "id")
    assert f"first used at {first}:1" in problem.message


def test_missing_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(CaseFileError, match="does not exist"):
        load_cases([tmp_path / "absent.jsonl"], FluencyCase)


def test_dotted_domain_inventory_alias_is_canonicalised() -> None:
    case = FluencyCase.model_validate({**GOOD, "expected_predicates": ["no_dotted_domain_inventory"]})
    assert case.expected_predicates == ["no_dotted_inventory"]


def test_shipped_fluency_cases_match_the_seed_composition() -> None:
    spec = next(s for s in discover_lanes() if s.name == "deterministic_fluency")
    public = [c.case for c in load_split(spec, "public")]
    dev = [c.case for c in load_split(spec, "dev")]
    categories = [c.category for c in public]
    assert len(public) == 15 and len(dev) == 2
    assert {c: categories.count(c) for c in set(categories)} == {
        "pack_definition": 10,
        "oov_invitation": 2,
        "cause_no_chain_unknown_domain": 2,
        "teaching_grounded": 1,
    }
    assert all(c.expected_predicates for c in public)
    # OOV invitations are explanatory by design and do not assert a finite verb (seed 001).
    assert all(
        "finite_predicate_shape" not in c.expected_predicates
        for c in public
        if c.category == "oov_invitation"
    )


def test_a_threshold_on_a_metric_the_kind_does_not_emit_is_a_lane_file_problem(tmp_path: Path) -> None:
    from eval_pipeline.lanes.registry import discover_lanes as discover

    lane = tmp_path / "typo_lane"
    lane.mkdir()
    (lane / "contract.md").write_text("# typo_lane\n", encoding="utf-8")
    (lane / "lane.yaml").write_text(
        "name: typo_lane\nkind: i18n_prompt\nversion: v1\ntitle: Typo\n"
        "splits: {dev: [cases.jsonl]}\nnightly_splits: [dev]\n"
        "thresholds:\n  - {metric: no_placeholder_rat, op: '==', value: 1.0, severity: ERROR, reason: typo}\n",
        encoding="utf-8",
    )
    with pytest.raises(CaseFileError) as caught:
        discover(tmp_path)
    (problem,) = caught.value.problems
    assert (
        problem.field == "thresholds[0].metric" and "'no_placeholder_rat' is not a metric" in problem.message
    )
