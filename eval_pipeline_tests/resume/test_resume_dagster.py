"""The same through the Dagster path: a lane run of a declared target killed at about half its
turns, then re-executed from failure (what the UI's button does), answers the journaled
sessions from the journal and sends only the rest, counted at a real server on 127.0.0.1; its
tables equal an uninterrupted run's and history shows the one committed run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

from eval_pipeline.core.settings import EVALS_ENV
from eval_pipeline.dagster_wiring.launch import ensure_instance
from eval_pipeline.run.pipeline import LaneRun
from eval_pipeline.runtimes.serve import ServeConfig
from eval_pipeline_tests.paths import PROJECT_ROOT
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
    requests_served,
    served_options,
    write_threads,
)
from eval_pipeline_tests.runtimes.helpers import served_reference

THREADS = KILLED_THREADS
CONCURRENCY = KILLED_CONCURRENCY
REEXECUTE = Path(__file__).with_name("reexecute.py")


@pytest.mark.slow
@pytest.mark.xdist_group(RESUME_GROUP)
def test_reexecution_from_failure_resumes_from_the_journal(
    tmp_path: Path,
    isolated_state: Path,
    history_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    uninterrupted_threads: LaneRun,
) -> None:
    evals = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals" / LANE, evals / LANE)
    write_threads(evals / LANE / "dev" / "cases.jsonl", THREADS)
    monkeypatch.setenv(EVALS_ENV, str(evals))
    with served_reference(ServeConfig(latency_ms=20)) as server:
        target = {
            "spec": f"openai:{server.base_url}",
            "options": served_options(),
            "concurrency": CONCURRENCY,
        }
        (evals / "runtimes.yaml").write_text(
            yaml.safe_dump({"targets": {"served": target}}), encoding="utf-8"
        )
        total = THREADS * TURNS_PER_THREAD

        before = requests_served(server)
        arguments = ["--runtime", "served", "--lane", LANE, "--split", "dev"]
        kill_when(arguments, lambda: requests_served(server) - before >= total // 2)
        kept = journaled_sessions(isolated_state)
        assert THREADS // 5 <= kept <= THREADS * 4 // 5, kept
        instance = ensure_instance()
        (killed,) = instance.get_runs(dg.RunsFilter(job_name=f"{LANE}_job"))
        assert killed.status == dg.DagsterRunStatus.FAILURE

        at_reexecution = requests_served(server)
        reexecuted = subprocess.run(
            [sys.executable, str(REEXECUTE), killed.job_name, killed.run_id],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert reexecuted.returncode == 0, reexecuted.stderr[-3000:]
        sent = requests_served(server) - at_reexecution

    assert sent == (THREADS - kept) * TURNS_PER_THREAD
    child_id = reexecuted.stdout.split()[-1]
    child = instance.get_run_by_id(child_id)
    assert child is not None and child.parent_run_id == killed.run_id
    assert committed_runs(history_root) == [child_id]
    assert journals(isolated_state) == []
    logs = " ".join(str(entry.user_message) for entry in instance.all_logs(child_id))
    assert f"resumed: {kept:,} of {THREADS:,} sessions from the journal" in logs
    for table in TABLE_COLUMNS:
        pd.testing.assert_frame_equal(
            comparable(history_table(history_root, table), table),
            comparable(getattr(uninterrupted_threads, table), table),
            obj=table,
        )
