"""A run scored in case batches (stage files of many row groups) is the run scored in one piece."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval_pipeline.cases import CaseFileError
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.lanes import discover_lanes, find_lane
from eval_pipeline.metrics.usage import TIMED_METRICS
from eval_pipeline.run.pipeline import evaluate_lane, write_cases
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline.tables.columns import CASE_PREDICATES, TURN_PREDICATES, lane_columns
from eval_pipeline.tables.stage_files import BATCH_TURNS_ENV, StageWriter, aligned_count, batch_turns, failed
from eval_pipeline_tests.lane_requests import lane_request

SEED = 11


def _lane_rows(table: pd.DataFrame, schema: pa.Schema) -> pd.DataFrame:
    columns = lane_columns(schema)
    ordered = table[columns].sort_values(["case_id", "sample_index", "predicate"], kind="stable")
    return ordered.reset_index(drop=True).astype(object).where(ordered.notna().reset_index(drop=True), None)


@pytest.mark.slow
@pytest.mark.parametrize("lane", [spec.name for spec in discover_lanes()])
def test_a_lane_scored_in_batches_equals_it_scored_in_one_piece(
    lane: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = find_lane(lane)
    split = spec.nightly_splits[0]
    monkeypatch.setenv(BATCH_TURNS_ENV, "3")  # a few cases per batch: many batches
    batched = materialize_lane(
        spec,
        find_target("reference"),
        lane_request(split, "2026-11-30", repeat=2, seed=SEED),
        instance=ensure_instance(),
    )
    assert batched.failure is None, batched.failure
    whole = evaluate_lane(spec, split, build_runtime("reference"), repeat=2, seed=SEED)

    transcripts = batched.files["transcripts"]
    assert transcripts.batch_count > 1, "the run was not cut into batches"
    assert transcripts.batch_count == batched.files["case_predicates"].batch_count

    assert batched.metrics is not None
    stored = batched.metrics.set_index("metric")
    for value in whole.metric_values:
        if value.metric in TIMED_METRICS:  # two runs' timings differ
            continue
        row = stored.loc[value.metric]
        for column, expected in (
            ("value", value.value),
            ("numerator", value.numerator),
            ("denominator", value.denominator),
            ("pass_hat_k", value.pass_hat_k),
        ):
            got = None if pd.isna(row[column]) else float(row[column])
            assert got == pytest.approx(expected), (value.metric, column)
    assert set(stored.index) == {v.metric for v in whole.metric_values}

    for name, schema, expected in (
        ("case_predicates", CASE_PREDICATES, whole.case_predicates),
        ("turn_predicates", TURN_PREDICATES, whole.turn_predicates),
    ):
        got = getattr(batched, name)
        assert got is not None
        pd.testing.assert_frame_equal(
            _lane_rows(got, schema), _lane_rows(expected, schema), check_dtype=False
        )


def test_cases_are_cut_into_batches_of_whole_cases_by_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = find_lane("conversational_thread_coherence")
    monkeypatch.setenv(BATCH_TURNS_ENV, "20")
    cases = write_cases(spec, "public")
    try:
        sizes = [int(batch["turns"].sum()) for batch in cases.batches()]
        assert len(sizes) > 1 and sum(sizes) == int(cases.read(["turns"])["turns"].sum())
        # a batch closes at the first case that reaches the budget, never splitting a case
        assert all(size >= 20 for size in sizes[:-1])
        turns = [list(batch["turns"]) for batch in cases.batches()]
        assert all(sum(batch[:-1]) < 20 for batch in turns[:-1])
    finally:
        cases.path.unlink()


def test_a_bad_batch_size_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BATCH_TURNS_ENV, "lots")
    with pytest.raises(
        ValueError, match=f"{BATCH_TURNS_ENV} must be a whole number of turns >= 1, got 'lots'"
    ):
        batch_turns()


def test_a_case_file_with_problems_leaves_no_stage_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BATCH_TURNS_ENV, "1")
    staging = tmp_path / "staging"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))  # where stage files are written
    good = find_lane("deterministic_fluency").case_files("public")[0].read_text().splitlines()
    broken = tmp_path / "cases" / "mixed.jsonl"
    broken.parent.mkdir()
    broken.write_text("\n".join([*good, '{"id": 7}', good[0]]) + "\n", encoding="utf-8")
    with pytest.raises(CaseFileError) as raised:
        write_cases(find_lane("deterministic_fluency"), "public", broken)
    problems = [str(p) for p in raised.value.problems]
    assert any(f":{len(good) + 1}: id:" in p for p in problems)
    assert any(f":{len(good) + 2}: id: duplicate case id" in p for p in problems)
    assert list(staging.iterdir()) == []  # nothing half-written


def test_stage_files_must_hold_the_same_batches(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("case_id", pa.string())])
    files = []
    for batches in (3, 2):
        with StageWriter(schema, tmp_path) as writer:
            for index in range(batches):
                writer.write(pd.DataFrame({"case_id": [f"c{index}"] if index else []}))
            files.append(writer.finish())
    assert [pq.ParquetFile(f.path).metadata.num_row_groups for f in files] == [3, 2]
    assert [len(b) for b in files[0].batches()] == [0, 1, 1]  # an empty batch stays a batch
    with pytest.raises(ValueError, match="do not hold the same case batches"):
        aligned_count(*files)


def test_a_column_maximum_comes_from_statistics_or_the_values(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("sample_index", pa.int32())])
    with StageWriter(schema, tmp_path) as writer:
        for values in ([0, 2, 1], [], [None, None], [3, None]):
            writer.write(pd.DataFrame({"sample_index": pd.array(values, dtype="Int64")}))
        stored = writer.finish()
    assert stored.column_max("sample_index") == 3
    assert stored.column_max("absent") is None


def test_rows_of_some_cases_are_read_from_the_batches_that_hold_them(tmp_path: Path) -> None:
    schema = pa.schema([("case_id", pa.string()), ("passed", pa.bool_()), ("message", pa.string())])
    batches = [
        pd.DataFrame(
            {"case_id": [f"c{b}{i}" for i in range(3)], "passed": [False, True, None], "message": "m"}
        )
        for b in range(3)
    ]
    with StageWriter(schema, tmp_path) as writer:
        for batch in batches:
            writer.write(batch)
        stored = writer.finish()
    whole = pd.concat(batches, ignore_index=True)

    chosen = stored.read_cases(["c10", "c11", "c20", "nowhere"], where=failed())
    assert chosen.to_dict("records") == [
        {"case_id": case, "passed": False, "message": "m"} for case in ("c10", "c20")
    ]
    assert len(stored.read_cases(["c11", "c12"])) == 2 and stored.read_cases(["nowhere"]).empty

    narrow = stored.read(["case_id", "passed"], where=failed())
    assert list(narrow.columns) == ["case_id", "passed"]
    assert narrow["case_id"].tolist() == whole[whole["passed"].eq(False).fillna(False)]["case_id"].tolist()


def test_distinct_values_come_in_the_order_they_first_occur(tmp_path: Path) -> None:
    schema = pa.schema([("file", pa.string())])
    with StageWriter(schema, tmp_path) as writer:
        for files in (["b", "a", "b"], [None], ["c", "a", None]):
            writer.write(pd.DataFrame({"file": pd.array(files, dtype="string")}))
        stored = writer.finish()
    assert stored.distinct("file") == ["b", "a", "c"]
