"""Both lanes end to end on the reference runtime, concurrently, and replayed from recordings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from eval_pipeline.cases.loading import CaseFileError
from eval_pipeline.lanes import find_lane
from eval_pipeline.predicates.status import SPECULATIVE_KINDS
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane, load_split
from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.reference import ReferenceRuntime
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline_tests.metric_tables import untimed

ARTICULATION = "articulation_of_status"
THREAD = "conversational_thread_coherence"
SCORED = ["turn_predicates", "case_predicates", "metrics"]


def run(lane: str, split: str = "public", runtime_spec: str = "reference", concurrency: int = 1) -> LaneRun:
    return evaluate_lane(find_lane(lane), split, build_runtime(runtime_spec), concurrency=concurrency)


def metric(result: LaneRun, name: str) -> tuple[float | None, float | None, float | None]:
    row = result.metrics.set_index("metric").loc[name]
    return tuple(None if pd.isna(row[c]) else float(row[c]) for c in ("value", "numerator", "denominator"))  # type: ignore[return-value]


def test_articulation_on_reference_meets_the_contract() -> None:
    cases: list[Any] = [c.case for c in load_split(find_lane(ARTICULATION), "public")]
    speculative = sum(1 for c in cases if c.kind in SPECULATIVE_KINDS)
    controls = len(cases) - speculative
    result = run(ARTICULATION)
    assert metric(result, "speculative_articulation_rate") == (1.0, speculative, speculative)
    assert metric(result, "false_certainty_rate") == (0.0, 0.0, speculative)
    assert metric(result, "control_ok_rate") == (1.0, controls, controls)
    assert metric(result, "overall_pass")[0] == 1.0
    assert set(result.transcripts.loc[result.transcripts["role"] == "probe", "case_id"]) == {
        c.id for c in cases
    }
    assert set(result.turn_predicates["turn_index"]) <= set(
        result.transcripts.loc[result.transcripts["role"] == "probe", "turn_index"]
    )
    assert result.metrics.loc[result.metrics["severity"] == "ERROR", "passed"].all()


def test_thread_lane_on_reference_meets_every_target() -> None:
    cases: list[Any] = [c.case for c in load_split(find_lane(THREAD), "public")]
    turns = sum(len(c.turns) for c in cases)
    expected_grounded = sum(t.expects_grounded for c in cases for t in c.turns)
    with_anaphora = sum(any(t.anaphora_anchor_to for t in c.turns) for c in cases)
    result = run(THREAD)
    assert metric(result, "turns")[0] == turns and metric(result, "cases")[0] == len(cases)
    assert metric(result, "per_turn_grounded_rate") == (1.0, expected_grounded, expected_grounded)
    assert metric(result, "per_turn_not_fragment_rate") == (1.0, turns, turns)
    assert metric(result, "case_topic_anchor_rate") == (1.0, with_anaphora, with_anaphora)
    # Every public thread replays a subject that was pack/teaching-grounded before the replay.
    assert metric(result, "case_no_drift_rate") == (1.0, len(cases), len(cases))
    assert result.metrics.loc[result.metrics["severity"].notna(), "severity"].eq("WARN").all()


@pytest.mark.parametrize("lane", [ARTICULATION, THREAD])
def test_concurrent_run_equals_serial_run(lane: str) -> None:
    serial, concurrent = run(lane), run(lane, concurrency=4)
    for table in SCORED:
        serial_table, concurrent_table = getattr(serial, table), getattr(concurrent, table)
        if table == "metrics":  # the runtime's timings are the one thing two runs differ in
            serial_table, concurrent_table = untimed(serial_table), untimed(concurrent_table)
        pd.testing.assert_frame_equal(serial_table, concurrent_table)
    columns = ["case_id", "turn_index", "role", "prompt", "surface", "grounding_source", "epistemic_status"]
    pd.testing.assert_frame_equal(serial.transcripts[columns], concurrent.transcripts[columns])


def record(result: LaneRun, path: Path, *, edit: dict[tuple[str, int], dict[str, str]] | None = None) -> Path:
    columns = [
        "case_id",
        "turn_index",
        "prompt",
        "surface",
        "grounding_source",
        "surface_tag",
        "epistemic_status",
    ]
    with path.open("w", encoding="utf-8") as out:
        for row in result.transcripts[columns].to_dict("records"):
            clean = {k: (None if pd.isna(v) else v) for k, v in row.items()}
            clean["turn_index"] = int(clean["turn_index"])
            clean.update((edit or {}).get((clean["case_id"], clean["turn_index"]), {}))
            out.write(json.dumps(clean) + "\n")
    return path


@pytest.mark.parametrize("lane", [ARTICULATION, THREAD])
def test_replay_of_recorded_turns_rescores_identically(lane: str, tmp_path: Path) -> None:
    live = run(lane)
    replayed = run(lane, runtime_spec=f"replay:{record(live, tmp_path / 'recorded.jsonl')}")
    for table in SCORED:
        live_table, replayed_table = getattr(live, table), getattr(replayed, table)
        if table == "metrics":  # a recording is not timed
            live_table, replayed_table = untimed(live_table), untimed(replayed_table)
        pd.testing.assert_frame_equal(live_table, replayed_table)


def test_replayed_unmarked_probe_is_false_certainty(tmp_path: Path) -> None:
    live = run(ARTICULATION)
    probe = live.transcripts[
        (live.transcripts["case_id"] == "status_def_wisdom_001") & (live.transcripts["role"] == "probe")
    ]
    key = ("status_def_wisdom_001", int(probe["turn_index"].iloc[0]))
    path = record(live, tmp_path / "bare.jsonl", edit={key: {"surface": "Wisdom is the habit of doubting."}})
    result = run(ARTICULATION, runtime_spec=f"replay:{path}")
    assert metric(result, "false_certainty_rate")[1] == 1.0
    assert metric(result, "overall_pass")[0] == 0.0
    rows = result.case_predicates.set_index(["case_id", "predicate"])
    assert rows.loc[("status_def_wisdom_001", "false_certainty"), "code"] == "bare_assertion"


def test_replayed_drift_and_lost_anchor_are_caught(tmp_path: Path) -> None:
    live = run(THREAD)
    case = "thread_pack_shift_return_001"
    path = record(
        live,
        tmp_path / "drift.jsonl",
        edit={
            (case, 6): {"grounding_source": "none", "surface": "I have nothing on that subject at all."},
            (case, 7): {"surface": "Memory keeps the past available to the mind."},
        },
    )
    result = run(THREAD, runtime_spec=f"replay:{path}")
    rows = result.case_predicates.set_index(["case_id", "predicate"])
    assert rows.loc[(case, "no_topic_drift_to_none"), "passed"] == False  # noqa: E712 - nullable bool
    assert rows.loc[(case, "topic_anchor_present"), "passed"] == False  # noqa: E712
    assert "(turn 7; anchor" in rows.loc[(case, "topic_anchor_present"), "message"]
    assert metric(result, "case_no_drift_rate")[1] == metric(live, "case_no_drift_rate")[1] - 1


def test_replay_with_a_different_prompt_is_a_clear_error(tmp_path: Path) -> None:
    live = run(THREAD)
    path = record(
        live, tmp_path / "mismatch.jsonl", edit={("thread_pack_shift_return_001", 2): {"prompt": "Why?"}}
    )
    with pytest.raises(RuntimeSpecError, match=r"thread_pack_shift_return_001.*turn 2.*'Why\?'"):
        run(THREAD, runtime_spec=f"replay:{path}")


def test_bad_thread_case_names_file_line_and_field(tmp_path: Path) -> None:
    turns = [{"prompt": "What is wisdom?", "subject_lemma": "wisdom"}] * 7
    turns.append({"prompt": "What about that?", "anaphora_anchor_to": "memory"})
    good = {
        "id": "ok_thread",
        "turns": [*turns[:7], {"prompt": "What about that?", "anaphora_anchor_to": "wisdom"}],
    }
    path = tmp_path / "cases.jsonl"
    path.write_text(
        json.dumps(good)
        + "\n"
        + json.dumps({"id": "bad_anchor", "turns": turns})
        + "\n"
        + json.dumps({"id": "too_short", "turns": turns[:3]})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(CaseFileError) as caught:
        evaluate_lane(find_lane(THREAD), "public", ReferenceRuntime(), cases_path=path)
    problems = {(p.line, p.field): p.message for p in caught.value.problems}
    assert "turns[7].anaphora_anchor_to: 'memory' is not the subject_lemma" in problems[(2, "turns")]
    assert "at least 8" in problems[(3, "turns")]
    assert all(str(path) == p.file for p in caught.value.problems)
    assert not any(line == 1 for line, _ in problems)


def test_articulation_case_kind_must_match_its_setup(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(
        json.dumps(
            {"id": "a", "kind": "speculative_query", "subject": "x", "setup": [], "probe": "Is it confirmed?"}
        )
        + "\n"
        + json.dumps(
            {
                "id": "b",
                "kind": "no_teaching_control",
                "subject": "x",
                "setup": ["Actually, x is y."],
                "probe": "What is x?",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(CaseFileError) as caught:
        evaluate_lane(find_lane(ARTICULATION), "public", ReferenceRuntime(), cases_path=path)
    messages = {p.line: p.message for p in caught.value.problems}
    assert "needs a setup turn that teaches" in messages[1] and "must teach nothing" in messages[2]
