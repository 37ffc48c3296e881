"""``run --resume`` after a SIGKILL, against a real server on 127.0.0.1 that counts requests:
the resumed run sends only the turns of the sessions the journal did not keep, its tables equal
an uninterrupted run's, and history shows the one committed run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from eval_pipeline.run.pipeline import LaneRun
from eval_pipeline.runtimes.serve import ServeConfig
from eval_pipeline_tests.resume.helpers import (
    KILLED_CONCURRENCY,
    KILLED_THREADS,
    LANE,
    RESUME_GROUP,
    TABLE_COLUMNS,
    TURNS_PER_THREAD,
    committed_runs,
    comparable,
    history_table,
    journaled_sessions,
    journals,
    kill_when,
    openai_arguments,
    requests_served,
    run_cli,
    write_threads,
)
from eval_pipeline_tests.runtimes.helpers import served_reference

THREADS = KILLED_THREADS
TOTAL_TURNS = THREADS * TURNS_PER_THREAD
CONCURRENCY = KILLED_CONCURRENCY


@pytest.mark.slow
@pytest.mark.xdist_group(RESUME_GROUP)
def test_a_killed_run_resumes_sending_only_the_unanswered_sessions(
    tmp_path: Path, isolated_state: Path, uninterrupted_threads: LaneRun
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", THREADS)
    with served_reference(ServeConfig(latency_ms=20)) as server:
        common = [
            *openai_arguments(server),
            "--lane",
            LANE,
            "--cases",
            str(cases),
            "--concurrency",
            str(CONCURRENCY),
        ]
        resumed = tmp_path / "resumed"
        before = requests_served(server)
        kill_when(
            [*common, "--history", str(resumed)], lambda: requests_served(server) - before >= TOTAL_TURNS // 2
        )
        sent_before_kill = requests_served(server) - before
        kept = journaled_sessions(isolated_state)
        assert THREADS // 5 <= kept <= THREADS * 4 // 5, kept  # about half
        assert not (resumed / "run_manifests").exists()  # the killed run never committed

        at_resume = requests_served(server)
        finished = run_cli([*common, "--history", str(resumed), "--resume"])
        assert finished.returncode == 0, finished.stderr[-3000:]
        sent_by_resume = requests_served(server) - at_resume

    assert sent_by_resume == (THREADS - kept) * TURNS_PER_THREAD
    assert sent_by_resume + kept * TURNS_PER_THREAD >= TOTAL_TURNS  # nothing answered twice is missing
    assert sent_before_kill >= kept * TURNS_PER_THREAD
    assert f"resumed: {kept:,} of {THREADS:,} sessions from the journal" in finished.stderr
    assert len(committed_runs(resumed)) == 1
    assert journals(isolated_state) == []  # committed: nothing left to resume
    for table in TABLE_COLUMNS:
        pd.testing.assert_frame_equal(
            comparable(history_table(resumed, table), table),
            comparable(getattr(uninterrupted_threads, table), table),
            obj=table,
        )
