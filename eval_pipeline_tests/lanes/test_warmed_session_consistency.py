"""warmed_session_consistency: one warm session per split, on the reference runtime and its warm-drift switch."""

from __future__ import annotations

import pytest

from eval_pipeline.lanes import Thread, TurnRequest, find_lane
from eval_pipeline.predicates import PREDICATES, TurnView
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.reference import ReferenceRuntime

LANE = "warmed_session_consistency"


def run(runtime: str, split: str = "public", concurrency: int = 1) -> LaneRun:
    return evaluate_lane(find_lane(LANE), split, build_runtime(runtime), concurrency=concurrency)


def values(lane_run: LaneRun) -> dict[str, float | None]:
    return {m.metric: m.value for m in lane_run.metric_values}


@pytest.mark.parametrize("split", ["dev", "public", "holdout"])
@pytest.mark.parametrize("runtime", ["reference", "reference:no-gloss"])
def test_the_reference_runtime_is_stable_when_warm(runtime: str, split: str) -> None:
    lane_run = run(runtime, split)
    assert lane_run.metrics["passed"].dropna().all()
    assert values(lane_run)["telemetry_consistency_rate"] == 1.0


def test_one_session_plays_the_whole_split_in_order() -> None:
    """A correction taught in one case is still taught in a later case: the session is shared."""
    quorbit = (
        Thread(
            case_id="a",
            turns=(TurnRequest(turn_index=0, role="turn", prompt="Actually, a quorbit is a shell."),),
            session="s",
        ),
        Thread(
            case_id="b",
            turns=(TurnRequest(turn_index=0, role="turn", prompt="What is a quorbit?"),),
            session="s",
        ),
    )
    warm = drive(ReferenceRuntime(), quorbit, Sending(concurrency=4))
    fresh = drive(
        ReferenceRuntime(), [t.model_copy(update={"session": None}) for t in quorbit], Sending(concurrency=4)
    )
    assert warm.set_index("case_id").loc["b", "grounding_source"] == "teaching"
    assert fresh.set_index("case_id").loc["b", "grounding_source"] == "oov"


def test_a_repeated_prompt_is_counted_once() -> None:
    lane_run = run("reference")
    stable = lane_run.turn_predicates[lane_run.turn_predicates["predicate"] == "grounding_stable"]
    # Seven cases check stability; one of them repeats two prompts (wisdom, memory): eight repeated prompts.
    assert stable["passed"].notna().sum() == 8
    assert "warm_truth_corrected_008" not in set(stable["case_id"])


def test_warm_drift_fails_every_blocking_check_for_its_own_reason() -> None:
    lane_run = run("reference:warm-drift")
    failed = lane_run.turn_predicates[lane_run.turn_predicates["passed"] == False]  # noqa: E712
    assert set(failed["code"]) == {
        "placeholder_present",
        "telemetry_mismatch",
        "grounding_changed",
        "grounding_lost",
    }
    blocking = lane_run.metrics[lane_run.metrics["severity"] == "ERROR"]
    assert not blocking["passed"].any()


def test_concurrency_does_not_split_a_warm_session() -> None:
    serial, concurrent = run("reference:warm-drift"), run("reference:warm-drift", concurrency=4)
    assert serial.turn_predicates.equals(concurrent.turn_predicates)


def test_predicates_without_telemetry_or_repeats_do_not_apply() -> None:
    turns = [
        TurnView("Truth is a fit.", "pack", prompt="What is truth?"),
        TurnView("Doubt is a state.", "pack", prompt="What is doubt?"),
    ]
    assert PREDICATES.get("telemetry_match").on_turn(turns, 0).code == "no_telemetry"
    assert PREDICATES.get("grounding_stable").on_turn(turns, 0).code == "asked_once"
    assert PREDICATES.get("grounded_holds_on_warm").on_turn(turns, 1).code == "first_ask"
    repeated = [*turns, TurnView("ok", "none", prompt="what is  TRUTH?")]
    assert PREDICATES.get("grounded_holds_on_warm").on_turn(repeated, 2).code == "grounding_lost"
    assert PREDICATES.get("grounding_stable").on_turn(repeated, 0).evidence["sources"] == ["pack", "none"]
