"""A lane scores a batch read back from the cases table (ids, prompts and listed fields from the
stored JSON, models built only where a rule reads one) exactly as it scores the case models."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from eval_pipeline.cases.batch import CaseBatch, _arrow_distinct_lists, case_ids, distinct_lists, field_values
from eval_pipeline.lanes import find_lane
from eval_pipeline.lanes.registry import lane_kind
from eval_pipeline.run.cases_stage import cases_frame
from eval_pipeline.run.pipeline import (
    case_predicate_table,
    cases_from_frame,
    load_split,
    sample_metrics,
    turn_predicate_table,
)
from eval_pipeline.tables.columns import TRANSCRIPTS, column_values, frame, lane_columns

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lane_outputs"
RECORDED = sorted(FIXTURES.glob("*.reference.json"))


@pytest.mark.parametrize("recorded", RECORDED, ids=[path.stem for path in RECORDED])
def test_a_lane_scores_a_case_batch_as_it_scores_the_models(recorded: Path) -> None:
    lane, split = recorded.name.split(".")[:2]
    spec = find_lane(lane)
    kind = lane_kind(spec)
    loaded = load_split(spec, split)
    models = [item.case for item in loaded]
    batch = cases_from_frame(kind, cases_frame(loaded, split))
    assert isinstance(batch, CaseBatch) and len(batch) == len(models)
    rows = [
        {k: v for k, v in row.items() if k in TRANSCRIPTS.names}
        for row in json.loads(recorded.read_text())["transcripts"]
    ]
    transcripts = frame(TRANSCRIPTS, rows)[lane_columns(TRANSCRIPTS)]

    assert kind.threads(batch, spec, split) == kind.threads(models, spec, split)
    scored = {}
    for name, cases in (("models", models), ("batch", batch)):
        turns = turn_predicate_table(kind, cases, transcripts)
        case_rows = case_predicate_table(kind, cases, transcripts, turns)
        scored[name] = turns, case_rows, sample_metrics(kind, cases, transcripts, turns, case_rows)
    pd.testing.assert_frame_equal(scored["batch"][0], scored["models"][0])
    pd.testing.assert_frame_equal(scored["batch"][1], scored["models"][1])
    assert scored["batch"][2] == scored["models"][2]
    assert len(scored["models"][1]) > 0  # every recorded split has case rows to compare


def test_a_batch_gives_ids_and_plain_fields_as_its_models_hold_them() -> None:
    spec = find_lane("deterministic_fluency")
    loaded = load_split(spec, "dev")
    models = [item.case for item in loaded]
    batch = cases_from_frame(lane_kind(spec), cases_frame(loaded, "dev"))
    assert case_ids(batch) == case_ids(models) == [case.id for case in models]
    for name in ("prompt", "category", "setup", "expected_predicates", "post_gloss_predicates"):
        assert field_values(batch, name) == field_values(models, name)
    assert list(batch) == models  # built on first read, equal to the validated ones


@pytest.mark.parametrize("recorded", RECORDED, ids=[path.stem for path in RECORDED])
def test_a_batch_reads_its_lists_of_texts_as_the_models_hold_them(recorded: Path) -> None:
    """Arrow's reading of every list field of the stored JSON agrees with the plain one."""
    lane, split = recorded.name.split(".")[:2]
    spec = find_lane(lane)
    loaded = load_split(spec, split)
    models = [item.case for item in loaded]
    table = cases_frame(loaded, split)
    texts = CaseBatch(type(models[0]), column_values(table, "case_id"), column_values(table, "case_json"))
    names = [name for name in type(models[0]).model_fields if isinstance(getattr(models[0], name), list)]
    texts_only = [
        name
        for name in names
        if all(isinstance(item, str) and item for case in models for item in getattr(case, name))
    ]
    for name in names:
        found = _arrow_distinct_lists(texts, [name]).get(name)
        if name not in texts_only:
            assert found is None  # not a list of (non-empty) texts: a batch reads it the plain way
            continue
        assert found is not None
        lists, of_case = found
        assert [lists[i] for i in of_case] == [tuple(getattr(case, name)) for case in models]
        plain_lists, plain_of_case = distinct_lists(models, [name])[name]
        assert (lists, of_case.tolist()) == (plain_lists, plain_of_case.tolist())
    # Read together (one pass over the JSON), each field as read alone.
    together = _arrow_distinct_lists(texts, texts_only)
    assert {name: (lists, of_case.tolist()) for name, (lists, of_case) in together.items()} == {
        name: (lists, of_case.tolist())
        for name, (lists, of_case) in distinct_lists(models, texts_only).items()
    }


def test_a_batch_given_how_to_read_its_json_reads_it_once_and_only_for_a_field_or_a_model() -> None:
    spec = find_lane("deterministic_fluency")
    loaded = load_split(spec, "dev")
    table = cases_frame(loaded, "dev")
    reads: list[int] = []

    def read() -> list[str]:
        reads.append(1)
        return column_values(table, "case_json")

    batch = CaseBatch(lane_kind(spec).case_model, column_values(table, "case_id"), read)
    assert (len(batch), case_ids(batch), reads) == (len(loaded), [item.case.id for item in loaded], [])
    assert field_values(batch, "prompt") == [item.case.prompt for item in loaded]
    assert list(batch) == [item.case for item in loaded]
    assert reads == [1]
