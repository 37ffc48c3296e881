"""Case rows of a declared lane at their edges: a case whose scored turn is missing, a case with
several stored rows of one predicate (the last one is its verdict), a verdict that does not
apply, repeated case ids, and a listed predicate no rule lifts."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from eval_pipeline.cases.loading import LoadedCase
from eval_pipeline.lanes import find_lane
from eval_pipeline.lanes.declared import DeclaredLane
from eval_pipeline.predicates import Verdict, reason
from eval_pipeline.run.cases_stage import cases_frame
from eval_pipeline.run.pipeline import cases_from_frame
from eval_pipeline.tables.columns import (
    CASE_PREDICATES,
    TRANSCRIPTS,
    TURN_PREDICATES,
    frame,
    kind_columns,
    lane_columns,
)

LISTED = ["no_placeholder", "complete_punctuation"]


def fluency() -> DeclaredLane:
    return DeclaredLane(find_lane("deterministic_fluency"))


def case(kind: DeclaredLane, case_id: str, expected: list[str], post_gloss: list[str] | None = None) -> Any:
    return kind.case_model.model_validate(
        {
            "id": case_id,
            "prompt": "What is trust?",
            "category": "pack_definition",
            "expected_predicates": expected,
            "post_gloss_predicates": post_gloss or [],
        }
    )


def turn_rows(rows: list[tuple[str, str, bool | None, str, str]]) -> pd.DataFrame:
    """Turn predicate rows (case_id, predicate, passed, code, evidence), all of turn 0."""
    records = [
        {"case_id": c, "turn_index": 0, "predicate": p, "passed": v, "code": code, "evidence": e}
        for c, p, v, code, e in rows
    ]
    return frame(TURN_PREDICATES, records)[kind_columns(TURN_PREDICATES)]


def no_transcripts() -> pd.DataFrame:
    return frame(TRANSCRIPTS, [])[lane_columns(TRANSCRIPTS)]


def rows_of(table: pd.DataFrame, case_id: str) -> dict[str, dict[str, Any]]:
    return {str(row["predicate"]): row for row in table[table["case_id"] == case_id].to_dict("records")}


def test_a_missing_turn_fails_every_lifted_predicate_and_the_listed_contract() -> None:
    kind = fluency()
    cases = [case(kind, "answered", LISTED), case(kind, "silent", LISTED)]
    lifted = kind.declaration.turn_predicates[0].predicates
    stored = turn_rows([("answered", name, True, "ok", "{}") for name in lifted])
    table = kind.case_predicates(cases, no_transcripts(), stored)

    assert list(table.columns) == kind_columns(CASE_PREDICATES)
    # Per case, in rule order: the six lifted predicates, then expected_predicates (the
    # post-gloss list is empty, so it makes no row).
    assert table["case_id"].tolist() == ["answered"] * 7 + ["silent"] * 7
    assert table["predicate"].tolist() == [*lifted, "expected_predicates"] * 2
    silent = rows_of(table, "silent")
    for name in lifted:
        row = silent[name]
        assert (row["passed"], row["code"], row["evidence"]) == (False, "no_scored_turn", "{}")
        assert row["message"] == reason(name, Verdict(False, "no_scored_turn"))
        assert row["severity"] == ("hard" if name in LISTED else "report")
    contract = silent["expected_predicates"]
    assert (contract["passed"], contract["code"]) == (False, "contract_failed")
    assert contract["evidence"] == '{"failing": ["no_placeholder", "complete_punctuation"]}'
    answered = rows_of(table, "answered")
    assert all(answered[name]["passed"] is True for name in lifted)
    assert answered["expected_predicates"]["message"] == "Every listed predicate holds."


def test_the_last_stored_row_is_the_verdict_and_a_verdict_may_not_apply() -> None:
    kind = fluency()
    cases = [case(kind, "twice", LISTED), case(kind, "twice", LISTED), case(kind, "open", LISTED)]
    failing = '{"ending": "is <pending>"}'
    stored = turn_rows(
        [
            ("twice", "complete_punctuation", True, "ok", "{}"),
            ("open", "no_placeholder", None, "not_applicable", "{}"),
            ("twice", "complete_punctuation", False, "missing_terminal_punctuation", failing),
            ("open", "complete_punctuation", True, "ok", "{}"),
        ]
    )
    table = kind.case_predicates(cases, no_transcripts(), stored)

    # Two cases share the id "twice": both get its rows, each in its own place.
    assert table["case_id"].tolist()[:14] == ["twice"] * 14
    punctuation = table[(table["case_id"] == "twice") & (table["predicate"] == "complete_punctuation")]
    assert punctuation["passed"].tolist() == [False, False]
    assert punctuation["evidence"].tolist() == [failing, failing]
    expected_message = reason(
        "complete_punctuation", Verdict.fail("missing_terminal_punctuation", ending="is <pending>")
    )
    assert punctuation["message"].tolist() == [expected_message] * 2
    open_case = rows_of(table, "open")
    assert open_case["no_placeholder"]["passed"] is None
    assert open_case["no_placeholder"]["message"] == reason("no_placeholder", Verdict.not_applicable())
    # A verdict that does not apply does not fail the case's listed contract.
    assert open_case["expected_predicates"]["passed"] is True


def test_a_batch_read_back_scores_as_the_models() -> None:
    kind = fluency()
    models = [
        case(kind, f"c{i}", LISTED[: 1 + i % 2], ["finite_predicate_shape"] * (i % 3 == 0)) for i in range(6)
    ]
    stored = turn_rows(
        [(f"c{i}", "complete_punctuation", i % 2 == 0, "ok" if i % 2 == 0 else "x", "{}") for i in range(5)]
    )
    loaded = [LoadedCase(m, "cases.jsonl", line) for line, m in enumerate(models, start=1)]
    batch = cases_from_frame(kind, cases_frame(loaded, "dev"))
    pd.testing.assert_frame_equal(
        kind.case_predicates(batch, no_transcripts(), stored),
        kind.case_predicates(models, no_transcripts(), stored),
    )


def test_a_listed_predicate_no_rule_lifts_names_the_first_case_listing_it() -> None:
    spec = find_lane("deterministic_fluency")
    rule = spec.turn_predicates[0]
    narrowed = [rule.model_copy(update={"predicates": ["no_placeholder"]})]
    kind = DeclaredLane(spec.model_copy(update={"turn_predicates": narrowed}))
    cases = [
        case(kind, "fine", ["no_placeholder"]),
        case(kind, "first", ["no_placeholder", "complete_punctuation"]),
    ]
    with pytest.raises(KeyError, match="case 'first' lists 'complete_punctuation', which no rule lifted"):
        kind.case_predicates(cases, no_transcripts(), turn_rows([]))
