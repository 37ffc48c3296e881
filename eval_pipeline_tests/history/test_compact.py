"""Compaction: one file per table per lane per month, same answers, no row lost or doubled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history.compact import compact
from eval_pipeline.history.diff import diff_pairs, pairs_to_diff
from eval_pipeline.history.flaky import case_flip_rates, rate_intervals
from eval_pipeline.history.runs import ref_from_row
from eval_pipeline.history.store import compacted_runs, is_committed
from eval_pipeline.history.views import connect, scope_to_run
from eval_pipeline.run.pipeline import LaneRun

from .conftest import CANDIDATE_RUNS, LANE, METRICS_PER_RUN, REFERENCE_RUNS, record_run

ANSWERS = {
    "metrics": "SELECT * FROM metrics ORDER BY run_id, metric",
    "case_predicates": "SELECT * FROM case_predicates ORDER BY run_id, case_id, predicate",
    "turn_verdicts": "SELECT * FROM turn_verdicts ORDER BY run_id, case_id, turn_index, predicate",
    "transcripts": "SELECT * EXCLUDE (latency_ms) FROM transcripts ORDER BY run_id, case_id, turn_index",
    "runs": "SELECT * FROM runs ORDER BY lane, split, runtime, case_set, seq",
    "run_manifests": "SELECT * FROM run_manifests ORDER BY lane, run_id",
}


def answers(root: str) -> dict[str, pd.DataFrame]:
    with connect(root) as con:
        out = {name: con.execute(sql).df() for name, sql in ANSWERS.items()}
        out["flaky"] = case_flip_rates(con, last=10)
        out["rates"] = rate_intervals(con, last=10)
        out["diff"] = pd.concat([d.flips for d in diff_pairs(con, pairs_to_diff(con))], ignore_index=True)
    return out


def parquet_files(root: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*.parquet"))


def test_compaction_keeps_every_answer(history: str) -> None:
    before = answers(history)
    done = compact(history, "2024-03")
    assert {(d.table, d.month, d.runs_added) for d in done} == {
        (table, "2024-03", 5)
        for table in ("metrics", "case_predicates", "turn_verdicts", "transcripts", "run_manifests")
    }
    assert [f for f in parquet_files(history) if "2024-03" in f] == [
        f"{table}/lane={LANE}/date=2024-03/compacted.parquet"
        for table in ("case_predicates", "metrics", "run_manifests", "transcripts", "turn_verdicts")
    ]
    after = answers(history)
    for name, frame in before.items():
        pd.testing.assert_frame_equal(frame, after[name], obj=name)


def test_compaction_is_idempotent_and_append_stays_idempotent(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    compact(history, "2024-03")
    files = parquet_files(history)
    rows = answers(history)["case_predicates"]
    assert compact(history, "2024-03") == []
    for stored in (*CANDIDATE_RUNS, *REFERENCE_RUNS):  # retries of already-compacted runs write nothing
        record_run(history, lane_runs[stored.glossed], stored)
    assert parquet_files(history) == files
    pd.testing.assert_frame_equal(answers(history)["case_predicates"], rows)
    assert "2024-03-02/run-c2" in compacted_runs(history, "metrics", LANE, "2024-03")


def test_a_late_run_joins_the_compacted_month(history: str, lane_runs: dict[bool, LaneRun]) -> None:
    from .conftest import StoredRun

    compact(history, "2024-03")
    record_run(history, lane_runs[False], StoredRun("run-late", "candidate", "2024-03-04", False))
    second = compact(history, "2024-03")
    assert {(d.runs_added, d.runs_total) for d in second} == {(1, 6)} and len(second) == 5
    with connect(history) as con:
        counts = con.execute("SELECT run_id, count(*) FROM metrics GROUP BY 1 ORDER BY 1").fetchall()
    assert counts == [
        (run, METRICS_PER_RUN)
        for run in ("run-c1", "run-c2", "run-c3", "run-c4", "run-late", "run-r1", "run-r2")
    ]


def test_history_compact_command_and_plain_history_both_work(history: str) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["history", "compact", "--month", "2024-04", "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1:] == [
        f"{table},{LANE},2024-04,1,1,{rows},1,0"
        for table, rows in (
            ("metrics", METRICS_PER_RUN),
            ("case_predicates", 115),
            ("turn_verdicts", 90),
            ("transcripts", 16),
            ("run_manifests", 1),
        )
    ]
    result = runner.invoke(app, ["history", "--metric", "cases", "--format", "csv"])
    assert result.exit_code == 0 and len(result.output.splitlines()) == 1 + 6
    result = runner.invoke(app, ["history", "compact", "--month", "2024-4"])
    assert result.exit_code == 2 and "not YYYY-MM" in result.output


def test_a_committed_run_is_known_by_its_id_before_and_after_compaction(history: str) -> None:
    assert is_committed(history, LANE, "run-c2") and not is_committed(history, LANE, "run-c9")
    compact(history, "2024-03")
    assert [f for f in parquet_files(history) if f.startswith("run_manifests/") and "run-c2" in f] == []
    assert is_committed(history, LANE, "run-c2")  # inside the month's compacted file
    assert not is_committed(history, LANE, "run-c9") and not is_committed(history, LANE, "../run-c2")


def test_views_scoped_to_a_run_hold_exactly_its_rows_from_its_own_file_or_the_compacted_month(
    history: str,
) -> None:
    # The regression step reads the previous run's files only (views.scope_to_run): whether the
    # run sits in its own file or in a compacted month (which holds the month's other runs too),
    # the views must hold all of its rows, as the lane-wide views do; its own file, nothing else.
    tables = ("metrics", "case_predicates", "turn_verdicts", "transcripts")

    def rows_of(run_id: str) -> dict[str, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]]:
        with connect(history) as whole, connect(history, lane=LANE, tables=()) as scoped:
            (row,) = whole.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df().to_dict("records")
            scope_to_run(scoped, history, ref_from_row(row))
            return {
                table: (
                    whole.execute(f"SELECT * FROM {table} WHERE run_id = ? ORDER BY ALL", [run_id]).df(),
                    scoped.execute(f"SELECT * FROM {table} WHERE run_id = ? ORDER BY ALL", [run_id]).df(),
                    scoped.execute(f"SELECT DISTINCT run_id FROM {table}").df(),
                )
                for table in tables
            }

    march = [s for s in (*CANDIDATE_RUNS, *REFERENCE_RUNS) if s.date.startswith("2024-03")]
    for compacted in (False, True):
        if compacted:
            compact(history, "2024-03")
            assert "metrics/lane=deterministic_fluency/date=2024-03/compacted.parquet" in parquet_files(
                history
            )
        for run_id in ("run-c2", "run-c4"):  # March (compacted the second time) and April (never)
            for table, (whole, scoped, runs_read) in rows_of(run_id).items():
                assert len(whole) > 0 or table == "turn_verdicts", (table, run_id)
                pd.testing.assert_frame_equal(
                    scoped, whole, obj=f"{table} of {run_id}, compacted={compacted}"
                )
                in_own_file = not compacted or run_id == "run-c4"
                assert set(runs_read["run_id"]) <= ({run_id} if in_own_file else {s.run_id for s in march}), (
                    table
                )


def test_a_process_that_used_history_forks_children_that_work(history: str) -> None:
    # Connections share one in-memory database per process (views.connect): a child forked
    # to run a command (subprocess with a preexec_fn forks, runs Python, then execs) and a
    # forked child that queries history itself must both work, and neither may touch the
    # parent's database (a crash there killed the forked child before its exec).
    with connect(history) as con:
        expected = con.execute("SELECT count(*) FROM runs").fetchone()
    child = subprocess.run(
        [sys.executable, "-c", "print('exec')"], preexec_fn=lambda: None, capture_output=True
    )
    assert (child.returncode, child.stdout.strip()) == (0, b"exec")
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked child: its own database, the same answer
        os.close(reader)
        try:
            with connect(history) as con:
                os.write(writer, repr(con.execute("SELECT count(*) FROM runs").fetchone()).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as answer:
        said = answer.read()
    _, status = os.waitpid(pid, 0)
    assert (os.waitstatus_to_exitcode(status), said) == (0, repr(expected))
    with connect(history) as con:  # and the parent's database still answers
        assert con.execute("SELECT count(*) FROM runs").fetchone() == expected
