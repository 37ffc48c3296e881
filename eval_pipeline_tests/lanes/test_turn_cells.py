"""A declared lane's turn predicates table, assembled a column at a time, equals the table the
scalar predicates give row by row: each turn of a rule's role, each predicate of the rule in
order, a rule's ``unless`` first, a faulted turn failing with ``turn_error``; whether the
cases are models or a batch read back from the cases table, and whatever mix of faulted and
answered turns a batch holds."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from eval_pipeline.lanes import find_lane
from eval_pipeline.lanes.declared import DeclaredLane
from eval_pipeline.predicates import PREDICATES, TurnView, Verdict
from eval_pipeline.predicates.base import TURN_VIEW_COLUMNS
from eval_pipeline.predicates.rows import evidence_json
from eval_pipeline.run.cases_stage import cases_frame
from eval_pipeline.run.drive import drive
from eval_pipeline.run.pipeline import cases_from_frame, load_split
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.tables.columns import column_values

LANES = ["deterministic_fluency", "conversational_thread_coherence"]


def recorded(lane: str) -> tuple[DeclaredLane, list[Any], Any, pd.DataFrame]:
    """The lane, its public cases as models and as a batch, and their transcripts on the reference runtime."""
    spec = find_lane(lane)
    kind = DeclaredLane(spec)
    loaded = load_split(spec, "public")
    models = [item.case for item in loaded]
    transcripts = drive(build_runtime("reference"), kind.threads(models, spec, "public"))
    return kind, models, cases_from_frame(kind, cases_frame(loaded, "public")), transcripts


def faulted(transcripts: pd.DataFrame, every: int) -> pd.DataFrame:
    """``transcripts`` with every ``every``-th turn faulted (no surface) and some sources dropped."""
    table = transcripts.copy()
    rows = table.index % every == 0
    table["error"] = table["error"].astype(object).where(~rows, "TimeoutError: no answer")
    table["surface"] = table["surface"].astype(object).where(~rows, None)
    table["grounding_source"] = table["grounding_source"].astype(object).where(table.index % 5 != 1, None)
    return table


def row_by_row(kind: DeclaredLane, cases: list[Any], transcripts: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The reference: every applicable (turn, rule, predicate) judged by the scalar predicate."""
    by_id = {case.id: case for case in cases}
    rows: list[tuple[Any, ...]] = []
    view_values = zip(*(column_values(transcripts, name) for name in TURN_VIEW_COLUMNS), strict=True)
    for record, values in zip(transcripts.to_dict("records"), view_values, strict=True):
        case = by_id[record["case_id"]]
        item = [item for _, _, item in kind.turn_sources(case)][record["turn_index"]]
        view = TurnView.from_values(**dict(zip(TURN_VIEW_COLUMNS, values, strict=True)))
        for rule in kind.declaration.turn_predicates:
            if rule.role is not None and rule.role != record["role"]:
                continue
            for name in rule.predicates:
                unless = rule.unless.get(name)
                if unless is not None and getattr(item, unless.field) is False:
                    verdict = Verdict.not_applicable(unless.code)
                else:
                    verdict = PREDICATES.get(name).function(view)
                evidence = evidence_json(verdict.evidence)
                rows.append(
                    (record["case_id"], record["turn_index"], name, verdict.passed, verdict.code, evidence)
                )
    return rows


def table_rows(table: pd.DataFrame) -> list[tuple[Any, ...]]:
    names = ["case_id", "turn_index", "predicate", "passed", "code", "evidence"]
    return list(zip(*(column_values(table, name) for name in names), strict=True))


@pytest.mark.parametrize("lane", LANES)
@pytest.mark.parametrize("every", [1, 3, 10**6])  # every turn faulted, some, none
def test_the_columnar_table_is_the_row_by_row_table(lane: str, every: int) -> None:
    kind, models, batch, transcripts = recorded(lane)
    table = faulted(transcripts, every)
    expected = row_by_row(kind, models, table)
    assert len(expected) > 20
    assert table_rows(kind.turn_predicates(models, table)) == expected
    assert table_rows(kind.turn_predicates(batch, table)) == expected


def test_the_thread_lane_public_split_has_a_turn_not_expected_to_ground() -> None:
    kind, models, _, transcripts = recorded("conversational_thread_coherence")
    codes = set(column_values(kind.turn_predicates(models, transcripts), "code"))
    assert "not_expected_to_ground" in codes
