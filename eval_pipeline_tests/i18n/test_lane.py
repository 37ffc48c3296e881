"""The i18n_prompt lane end to end: prompts never carry locked cases, the reference runtime
passes every hard assertion of the dev split, and replayed candidates reproduce failing codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.i18n import ASSERTION_NAMES, EvalCase
from eval_pipeline.i18n.prompts import EXAMPLE_MARK, LockedSplitError, compose_prompt, parse_request
from eval_pipeline.lanes import LaneSpec, find_lane, lane_kind
from eval_pipeline.lanes.kinds.i18n_prompt import few_shot_pool
from eval_pipeline.run.pipeline import evaluate_lane, load_split
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.tables.columns import CASE_PREDICATES, lane_columns


@pytest.fixture(scope="module")
def spec() -> LaneSpec:
    return find_lane("i18n_prompt")


def _cases(spec: LaneSpec, split: str) -> list[EvalCase]:
    return [loaded.case for loaded in load_split(spec, split)]


def test_a_pool_cannot_be_built_from_a_locked_split(spec: LaneSpec) -> None:
    with pytest.raises(LockedSplitError):
        few_shot_pool(spec, "locked")
    sneaky = spec.model_copy(update={"splits": {**spec.splits, "extra": spec.splits["locked"]}})
    with pytest.raises(LockedSplitError):
        few_shot_pool(sneaky, "extra")  # an unlocked split that lists a locked file


def test_no_locked_case_text_reaches_another_cases_prompt(spec: LaneSpec) -> None:
    kind = lane_kind(find_lane("i18n_prompt"))
    locked = _cases(spec, "locked")
    threads = [t for split in ("dev", "locked") for t in kind.threads(_cases(spec, split), spec, split)]
    assert any(EXAMPLE_MARK in t.turns[0].prompt for t in threads), "few-shot examples are in use"
    for case in locked:
        secrets = [case.source, *case.references]
        for thread in threads:
            if thread.case_id == case.id:
                continue
            assert not any(secret in thread.turns[0].prompt for secret in secrets), (case.id, thread.case_id)


def test_a_case_is_never_its_own_example(spec: LaneSpec) -> None:
    pool = few_shot_pool(spec, "dev")
    for case in _cases(spec, "dev"):
        assert all(example.source != case.source for example in pool.examples_for(case, 5))


def test_a_batch_request_round_trips(spec: LaneSpec) -> None:
    case = next(c for c in _cases(spec, "dev") if c.protocol and c.protocol.params.terminator)
    request = parse_request(compose_prompt(case))
    assert request is not None and request.batch
    assert list(request.items) == case.batch_items()
    assert request.terminator == case.protocol.params.terminator


@pytest.mark.parametrize("split", ["dev", "locked"])
def test_reference_runtime_passes_every_hard_assertion(spec: LaneSpec, split: str) -> None:
    run = evaluate_lane(spec, split, build_runtime("reference"))
    rows = run.case_predicates
    assert list(rows.columns) == lane_columns(CASE_PREDICATES)
    hard = rows[rows["severity"] == "hard"]
    assert hard["passed"].all(), hard[~hard["passed"].astype(bool)].to_dict("records")
    metrics = dict(zip(run.metrics["metric"], run.metrics["value"], strict=True))
    assert metrics["hard_pass_rate"] == 1.0
    assert metrics["cases"] == len(_cases(spec, split))
    assert run.turn_predicates.empty
    # Pseudo-localization expands text: tight report-severity budgets fail, and only those.
    failing = rows[~rows["passed"].astype(bool)]
    assert set(failing["code"]) <= {"max_chars_exceeded"} and set(failing["severity"]) <= {"report"}


def test_every_dev_assertion_is_exercised(spec: LaneSpec) -> None:
    names = {a.name for case in _cases(spec, "dev") for a in case.assertions}
    severities = {a.severity for case in _cases(spec, "dev") for a in case.assertions}
    assert names == set(ASSERTION_NAMES)
    assert severities == {"hard", "report"}


def test_replayed_candidates_reproduce_failing_codes(spec: LaneSpec, tmp_path: Path) -> None:
    candidates = {
        "placeholder.printf.002": {"text": "%s 加入了队伍。"},
        "placeholder.icu.001": {"text": "你有 {count, plural, other {条新消息}}。"},
        "protocol.item-count.001": {"text": "开始\n选项\n", "raw_response": "[1] 开始\n[2] 选项"},
        "protocol.terminator.001": {
            "text": "背包\n地图\n日志",
            "raw_response": "[1] 背包\n[2] 地图\n[3] 日志",
        },
        "number.grouping.001": {"text": "Du hast 1,234,567 Punkte."},
        "token.required.001": {"text": "打开蒸汽界面邀请好友。"},
        "length.button.001": {"text": "Einverstanden"},
    }
    dev_cases = _cases(spec, "dev")
    path = tmp_path / "candidates.jsonl"
    lines = []
    for case in dev_cases:
        record = candidates.get(case.id, {"text": case.source})
        lines.append(json.dumps({"case_id": case.id, "raw_response": None, **record}, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    run = evaluate_lane(spec, "dev", build_runtime(f"replay:{path}"))
    rows = run.case_predicates
    failing = {(r["case_id"], r["code"]) for r in rows[~rows["passed"].astype(bool)].to_dict("records")}
    for expected in [
        ("placeholder.printf.002", "placeholder_count_mismatch"),
        ("placeholder.icu.001", "placeholder_missing"),
        ("protocol.item-count.001", "protocol_missing_item"),
        ("protocol.terminator.001", "protocol_missing_terminator"),
        ("number.grouping.001", "number_wrong_separators"),
        ("token.required.001", "forbidden_rendering_present"),
        ("token.required.001", "required_token_missing"),
        ("length.button.001", "max_chars_exceeded"),
    ]:
        assert expected in failing
    metrics = dict(zip(run.metrics["metric"], run.metrics["value"], strict=True))
    assert metrics["hard_pass_rate"] < 1.0
    assert not run.metrics.set_index("metric").loc["hard_pass_rate", "passed"]
    evidence = json.loads(
        rows[(rows["case_id"] == "placeholder.printf.002") & (rows["code"] == "placeholder_count_mismatch")][
            "evidence"
        ].iloc[0]
    )
    assert evidence == {"actual_count": 1, "expected_count": 2, "placeholder": "%s"}


def test_a_failed_turn_fails_every_assertion_of_its_case(spec: LaneSpec, tmp_path: Path) -> None:
    case = _cases(spec, "dev")[0]
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"case_id": case.id, "error": "TimeoutError: slow"}) + "\n", encoding="utf-8")
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text(case.model_dump_json(exclude_defaults=False) + "\n", encoding="utf-8")
    run = evaluate_lane(spec, "dev", build_runtime(f"replay:{path}"), cases_path=cases_file)
    assert set(run.case_predicates["code"]) == {"candidate_error"}
    assert len(run.case_predicates) == len(case.assertions)
    assert not run.case_predicates["passed"].any()


def test_metrics_are_null_when_no_case_has_the_assertion(spec: LaneSpec, tmp_path: Path) -> None:
    case = next(c for c in _cases(spec, "dev") if [a.name for a in c.assertions] == ["max_chars"])
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text(case.model_dump_json() + "\n", encoding="utf-8")
    run = evaluate_lane(spec, "dev", build_runtime("reference"), cases_path=cases_file)
    metrics = {m.metric: m.value for m in run.metric_values}
    assert metrics["protocol_complete_pass_rate"] is None
    assert metrics["report_pass_rate"] is None or metrics["hard_pass_rate"] is None
