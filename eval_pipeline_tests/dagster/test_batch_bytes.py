"""A batch's rows are written, driven and scored in parts of whole cases closed by bytes of
text, not only by turns: a batch of long answers is never held whole, and a run scored in
parts is the run scored in one piece."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from eval_pipeline.lanes import find_lane
from eval_pipeline.metrics.usage import TIMED_METRICS
from eval_pipeline.run import pipeline
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.run.workers import WORKERS_ENV
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.tables.columns import TRANSCRIPTS, frame, lane_columns, to_arrow
from eval_pipeline.tables.stage_files import (
    BATCH_BYTES_ENV,
    BATCH_TURNS_ENV,
    StageFile,
    StageWriter,
    batch_bytes,
)

SEED = 5
lane_schema = pa.schema([TRANSCRIPTS.field(name) for name in lane_columns(TRANSCRIPTS)])


def in_order(table: pd.DataFrame) -> pd.DataFrame:
    """A stage table's rows in one order (a stage's row order across samples is no contract:
    batches and parts each list their samples in turn)."""
    keys = [k for k in ("case_id", "sample_index", "turn_index", "predicate") if k in table.columns]
    return table.sort_values(keys, kind="stable").reset_index(drop=True)


def rows(case_sizes: list[tuple[str, int, int]]) -> pa.Table:
    """Transcript rows: per (case, turns, surface characters) that many turns of that surface."""
    listed = [
        {
            "case_id": case,
            "turn_index": turn,
            "sample_index": 0,
            "role": "probe",
            "prompt": "",
            "surface": "x" * size,
        }
        for case, turns, size in case_sizes
        for turn in range(turns)
    ]
    return to_arrow(lane_schema, frame(TRANSCRIPTS, listed)[lane_columns(TRANSCRIPTS)])


def written(tmp_path: Path, batches: list[list[pa.Table]]) -> StageFile:
    """A transcripts stage file of ``batches``, each given to the writer in those pieces."""
    with StageWriter(TRANSCRIPTS, tmp_path) as writer:
        for pieces in batches:
            for piece in pieces:
                writer.add(piece, run_id="r", lane="l", split="s", runtime="t", case_set="s")
            writer.end_batch()
        return writer.finish()


def part_cases(file: StageFile, index: int) -> list[list[str]]:
    return [list(dict.fromkeys(part["case_id"])) for part in file.parts(index, ["case_id"])]


def test_a_batch_is_written_in_parts_closed_by_bytes_of_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BATCH_BYTES_ENV, "1000")
    assert batch_bytes() == 1000
    first = rows([("a", 2, 300), ("b", 1, 500), ("c", 3, 100), ("d", 1, 50), ("e", 4, 400)])
    second = rows([("f", 1, 10), ("g", 1, 10)])
    file = written(tmp_path, [[first], [second], [rows([])]])

    # Batches stay what they were given (whole, aligned with the other stages'); the first,
    # 2,550 bytes of surfaces, is three parts of whole cases, each closed at the first case that
    # brings it to 1,000 bytes (a: 600, +b: 1,100 | c: 300, d: 350, +e: 1,950 → the last case).
    assert file.batch_count == 3
    assert part_cases(file, 0) == [["a", "b"], ["c", "d", "e"]]
    assert [file.part_count(i) for i in range(3)] == [2, 1, 1]
    assert list(file.batch(0)["case_id"]) == list(first["case_id"].to_pylist())
    assert list(file.batch(1)["case_id"]) == ["f", "g"] and file.batch(2).empty
    assert [len(batch) for batch in file.batches(["case_id"])] == [11, 2, 0]

    # Given a piece at a time, a batch is cut the same way, its parts written as they fill.
    pieces = [first.slice(0, 3), first.slice(3, 4), first.slice(7, 4)]
    again = written(tmp_path, [pieces, [second], [rows([])]])
    assert [part_cases(again, i) for i in range(3)] == [part_cases(file, i) for i in range(3)]

    # Within the budget a batch is one part, as before.
    monkeypatch.setenv(BATCH_BYTES_ENV, str(10**9))
    whole = written(tmp_path, [[first], [second]])
    assert [whole.part_count(i) for i in range(2)] == [1, 1]


@pytest.mark.parametrize(
    ("lane", "repeat"), [("deterministic_fluency", 2), ("conversational_thread_coherence", 1)]
)
def test_a_run_driven_and_scored_in_parts_equals_it_in_one_piece(
    lane: str, repeat: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = find_lane(lane)
    split = spec.nightly_splits[0]
    whole = evaluate_lane(spec, split, build_runtime("reference"), repeat=repeat, seed=SEED)
    parts: list[int] = []
    score = pipeline._scored_batch

    def counting(*args: object) -> pa.Table:
        parts.append(args[3][1].part_count(args[-1]))  # type: ignore[index]
        return score(*args)  # type: ignore[arg-type]

    monkeypatch.setenv(BATCH_BYTES_ENV, "600")  # a few turns of text a part
    monkeypatch.setattr(pipeline, "FIRST_PIECE_TURNS", 4)  # driven a few turns at a time
    monkeypatch.setattr(pipeline, "_scored_batch", counting)
    cut = evaluate_lane(spec, split, build_runtime("reference"), repeat=repeat, seed=SEED)
    assert parts and max(parts) > 3, parts

    timed = ["latency_ms", "ttft_ms"]
    pd.testing.assert_frame_equal(
        in_order(cut.transcripts.drop(columns=timed)), in_order(whole.transcripts.drop(columns=timed))
    )
    pd.testing.assert_frame_equal(in_order(cut.turn_predicates), in_order(whole.turn_predicates))
    pd.testing.assert_frame_equal(in_order(cut.case_predicates), in_order(whole.case_predicates))
    expected = {v.metric: v for v in whole.metric_values if v.metric not in TIMED_METRICS}
    got = {v.metric: v for v in cut.metric_values if v.metric not in TIMED_METRICS}
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert (
            got[name].value,
            got[name].numerator,
            got[name].denominator,
            got[name].pass_hat_k,
        ) == pytest.approx(
            (value.value, value.numerator, value.denominator, value.pass_hat_k), nan_ok=True
        ), name


def test_batches_scored_in_parts_by_worker_processes_equal_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = find_lane("deterministic_fluency")
    split = spec.nightly_splits[0]
    whole = evaluate_lane(spec, split, build_runtime("reference"), repeat=2, seed=SEED)
    monkeypatch.setenv(BATCH_BYTES_ENV, "600")
    monkeypatch.setenv(BATCH_TURNS_ENV, "3")  # batches enough for the workers (PARALLEL_MIN_BATCHES)
    monkeypatch.setenv(WORKERS_ENV, "2")
    cut = evaluate_lane(spec, split, build_runtime("reference"), repeat=2, seed=SEED)
    pd.testing.assert_frame_equal(in_order(cut.turn_predicates), in_order(whole.turn_predicates))
    pd.testing.assert_frame_equal(in_order(cut.case_predicates), in_order(whole.case_predicates))
    assert [v.value for v in cut.metric_values if v.metric not in TIMED_METRICS] == pytest.approx(
        [v.value for v in whole.metric_values if v.metric not in TIMED_METRICS], nan_ok=True
    )
