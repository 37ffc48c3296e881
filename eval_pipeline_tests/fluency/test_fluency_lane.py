"""The deterministic_fluency lane end to end in-process: both reference modes, replay, missing metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from eval_pipeline.lanes import LaneSpec, find_lane
from eval_pipeline.metrics.scoring import rate
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes import RuntimeSpecError, build_runtime
from eval_pipeline_tests.metric_tables import untimed
from eval_pipeline_tests.runtimes.helpers import write_recording


@pytest.fixture(scope="module")
def spec() -> LaneSpec:
    return find_lane("deterministic_fluency")


def metrics(run: LaneRun) -> dict[str, float | None]:
    return {m.metric: m.value for m in run.metric_values}


def cases_failing(run: LaneRun, predicate: str) -> set[str]:
    rows = run.case_predicates[run.case_predicates["predicate"] == predicate]
    return set(rows.loc[rows["passed"].eq(False).fillna(False), "case_id"])


def test_glossed_reference_meets_every_threshold(spec: LaneSpec) -> None:
    run = evaluate_lane(spec, "public", build_runtime("reference"))
    assert run.metrics["passed"].dropna().all()
    values = metrics(run)
    assert values["cases"] == 15
    # Only the pack concept without a gloss (courage) stays a bare disclosure.
    assert cases_failing(run, "no_provenance_only") == {"fluency_courage_010"}
    assert values["no_provenance_only_rate"] == pytest.approx(14 / 15)


def test_without_glosses_the_lift_metrics_fall_and_the_floors_hold(spec: LaneSpec) -> None:
    glossed = metrics(evaluate_lane(spec, "public", build_runtime("reference")))
    bare_run = evaluate_lane(spec, "public", build_runtime("reference:no-gloss"))
    bare = metrics(bare_run)
    pack_cases = {
        c for c in bare_run.cases["case_id"] if not any(k in c for k in ("oov", "cause", "teaching"))
    }
    assert cases_failing(bare_run, "no_dotted_inventory") == pack_cases
    assert bare["no_dotted_inventory_rate"] == pytest.approx(5 / 15)  # seed 001's pre-gloss 0.3333
    for lift in ("no_provenance_only_rate", "no_dotted_inventory_rate"):
        assert bare[lift] is not None and glossed[lift] is not None
        assert bare[lift] < 0.85 <= glossed[lift]
    for floor in ("no_placeholder_rate", "complete_punctuation_rate", "expected_predicates_pass_rate"):
        assert bare[floor] == 1.0
    failed = bare_run.metrics[bare_run.metrics["passed"].eq(False).fillna(False)]
    assert set(failed["severity"]) == {"WARN"}


def test_teaching_case_is_scored_on_its_probe_not_its_setup(spec: LaneSpec) -> None:
    run = evaluate_lane(spec, "public", build_runtime("reference"))
    turns = run.transcripts[run.transcripts["case_id"] == "fluency_teaching_serendipity_015"]
    assert list(turns["role"]) == ["setup", "turn"]
    scored = run.turn_predicates[run.turn_predicates["case_id"] == "fluency_teaching_serendipity_015"]
    assert set(scored["turn_index"]) == {1}


def test_replay_of_recorded_turns_reproduces_the_tables(spec: LaneSpec, tmp_path: Path) -> None:
    live = evaluate_lane(spec, "public", build_runtime("reference:no-gloss"))
    recorded = tmp_path / "turns.jsonl"
    columns = ["case_id", "turn_index", "prompt", "surface", "grounding_source", "surface_tag"]
    recorded.write_text(
        "\n".join(json.dumps(r) for r in live.transcripts[columns].to_dict("records")) + "\n",
        encoding="utf-8",
    )
    replayed = evaluate_lane(spec, "public", build_runtime(f"replay:{recorded}"))
    pd.testing.assert_frame_equal(replayed.case_predicates, live.case_predicates)
    pd.testing.assert_frame_equal(
        untimed(replayed.metrics), untimed(live.metrics)
    )  # a recording is not timed


def test_replay_with_a_different_prompt_is_an_error(spec: LaneSpec, tmp_path: Path) -> None:
    recorded = tmp_path / "turns.jsonl"
    recorded.write_text(
        json.dumps(
            {"case_id": "fluency_dev_time_001", "turn_index": 0, "prompt": "What is space?", "surface": "x."}
        )
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(RuntimeSpecError, match="differs from the case's prompt"):
        evaluate_lane(spec, "dev", build_runtime(f"replay:{recorded}"))


def test_replay_missing_a_turn_is_an_error(spec: LaneSpec, tmp_path: Path) -> None:
    recorded = tmp_path / "turns.jsonl"
    recorded.write_text(
        json.dumps({"case_id": "fluency_dev_time_001", "turn_index": 0, "surface": "Time is order."}) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(RuntimeSpecError, match="no recorded turn 0 for case 'fluency_dev_oov_zorblat_002'"):
        evaluate_lane(spec, "dev", build_runtime(f"replay:{recorded}"))


def test_a_recorded_fault_fails_every_predicate_and_counts_in_error_rate(
    spec: LaneSpec, tmp_path: Path
) -> None:
    recorded = write_recording(
        tmp_path / "turns.jsonl",
        [
            {"case_id": "fluency_dev_time_001", "surface": "Time is the order of events."},
            {"case_id": "fluency_dev_oov_zorblat_002", "error": "TimeoutError: no answer in 30 s"},
        ],
    )
    run = evaluate_lane(spec, "dev", build_runtime(f"replay:{recorded}"))
    faulted = run.transcripts[run.transcripts["case_id"] == "fluency_dev_oov_zorblat_002"]
    assert faulted["error"].iloc[0].endswith("no answer in 30 s")
    assert cases_failing(run, "no_placeholder") == {"fluency_dev_oov_zorblat_002"}
    assert metrics(run)["error_rate"] == 0.5


def test_a_rate_with_no_applicable_cases_is_missing_not_one() -> None:
    empty = rate("x_rate", [("a", None), ("b", None)])
    assert empty.value is None and empty.denominator == 0
    assert rate("x_rate", [("a", True), ("b", False), ("c", None)]).value == 0.5
