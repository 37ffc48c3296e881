"""The worker processes of a big stage: results in order, one pool kept for the next stage, a
dead worker an error that the next stage recovers from, and batches scored by workers equal
to the batches scored in this process, table for table."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eval_pipeline.lanes import find_lane
from eval_pipeline.run import pipeline
from eval_pipeline.run.pipeline import (
    StageOutput,
    drive_cases,
    measure,
    score_cases,
    score_turns,
    write_cases,
)
from eval_pipeline.run.workers import WORKERS_ENV, close_workers, in_order, worker_count
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.tables.stage_files import BATCH_TURNS_ENV
from eval_pipeline_tests import workers_calls


@pytest.fixture(autouse=True)
def _no_pool_left() -> Iterator[None]:
    yield
    close_workers()


def test_results_come_in_the_order_of_the_calls_from_one_pool_kept_between_stages() -> None:
    calls = [partial(workers_calls.slow_square, n) for n in range(6)]
    assert list(in_order(reversed(calls), 2, ahead=3)) == [n * n for n in reversed(range(6))]
    first = set(in_order([partial(workers_calls.pid, n) for n in range(8)], 2))
    # The pool's processes, started and still running (one may have answered nothing yet)
    pool_processes = {child.pid for child in multiprocessing.active_children()}
    again = set(in_order([partial(workers_calls.pid, n) for n in range(8)], 2))
    assert len(first) <= 2 and first | again <= pool_processes  # the same workers served the next stage


def test_a_call_that_raises_raises_here_and_the_pool_serves_on() -> None:
    calls = [partial(workers_calls.square, 1), partial(workers_calls.fail, 2)]
    with pytest.raises(ValueError, match="call 2 failed"):
        list(in_order(calls, 2))
    assert list(in_order([partial(workers_calls.square, 3)], 2)) == [9]


def test_a_dead_worker_breaks_the_stage_and_the_next_stage_starts_new_workers() -> None:
    with pytest.raises(BrokenProcessPool):
        list(in_order([partial(workers_calls.die, 0)], 2))
    assert list(in_order([partial(workers_calls.square, n) for n in range(3)], 2)) == [0, 1, 4]


def test_stopping_early_leaves_no_call_running() -> None:
    results = in_order([partial(workers_calls.slow_square, n) for n in range(20)], 2, ahead=4)
    assert next(results) == 0
    results.close()  # the caller is done: the calls handed out are cancelled or waited for
    assert list(in_order([partial(workers_calls.square, 5)], 2)) == [25]


def test_a_daemonic_process_works_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert worker_count() == 3
    monkeypatch.setattr(
        "eval_pipeline.run.workers.current_process", lambda: type("P", (), {"daemon": True})()
    )
    assert worker_count() == 1


@pytest.mark.parametrize("lane", ["deterministic_fluency", "conversational_thread_coherence"])
def test_batches_scored_by_workers_are_the_batches_scored_here(
    lane: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = find_lane(lane)
    monkeypatch.setenv(BATCH_TURNS_ENV, "3")  # many batches: enough for the workers
    cases = write_cases(spec, "public", folder=tmp_path)
    run = {"run_id": "r1", "lane": spec.name, "split": "public", "runtime": "reference", "case_set": "public"}
    reference = build_runtime("reference")
    transcripts = drive_cases(spec, "public", cases, reference, output=StageOutput(run, tmp_path))
    assert cases.batch_count >= pipeline.PARALLEL_MIN_BATCHES

    def scored(workers: int) -> tuple[list[object], ...]:
        monkeypatch.setenv(WORKERS_ENV, str(workers))
        turns = score_turns(spec, cases, transcripts, run, tmp_path)
        verdicts = score_cases(spec, cases, transcripts, turns, run, tmp_path)
        files = [pq.ParquetFile(f.path) for f in (turns, verdicts)]
        groups = [[f.read_row_group(i) for i in range(f.num_row_groups)] for f in files]
        return (*groups, measure(spec, cases, transcripts, turns, verdicts))

    here, by_workers = scored(1), scored(2)
    assert len(here[0]) == cases.batch_count
    for mine, theirs in zip(here, by_workers, strict=True):
        assert mine == theirs
