"""``--resume`` against a real server on 127.0.0.1 that counts requests, where timing matters:
a second ``--resume`` of a series while the first runs is refused (it would send everything
again and commit a second run), and a SIGKILL costs at most the sessions in flight (each
answered session is handed to the journal file as it ends)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.runtimes.serve import ReferenceServer, ServeConfig
from eval_pipeline_tests.resume.helpers import (
    EXECUTABLE,
    LANE,
    TURNS_PER_THREAD,
    committed_runs,
    journals,
    kill_when,
    openai_arguments,
    requests_served,
    run_cli,
    write_threads,
)
from eval_pipeline_tests.runtimes.helpers import served_reference


def arguments(server: ReferenceServer, cases: Path, concurrency: int) -> list[str]:
    return [
        *openai_arguments(server),
        "--lane",
        LANE,
        "--cases",
        str(cases),
        "--concurrency",
        str(concurrency),
    ]


@pytest.mark.slow
def test_a_second_resume_while_the_first_runs_is_refused(
    tmp_path: Path, isolated_state: Path, history_root: Path
) -> None:
    threads, concurrency = 20, 4
    cases = write_threads(tmp_path / "threads.jsonl", threads)
    with served_reference(ServeConfig(latency_ms=300)) as server:
        common = arguments(server, cases, concurrency)
        stopped = CliRunner().invoke(app, ["run", *common, "--max-turns", "40"])
        assert stopped.exit_code == 4, stopped.output
        sent = requests_served(server)
        first = subprocess.Popen(
            [str(EXECUTABLE), "run", *common, "--resume"],
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while requests_served(server) == sent:  # the first has taken the journal and sends
                assert first.poll() is None and time.monotonic() < deadline, "the first resume never sent"
                time.sleep(0.02)
            second = CliRunner().invoke(app, ["run", *common, "--resume"])
            still_sending = first.poll() is None
            _, first_errors = first.communicate(timeout=300)
        finally:
            if first.poll() is None:
                first.kill()
        assert second.exit_code == 2, second.output
        said = " ".join(second.output.split())
        assert "a live run of this series holds this journal" in said and "Traceback" not in said
        assert still_sending  # the two overlapped
        assert first.returncode == 0, first_errors[-3000:]
        resumed_sessions = (requests_served(server) - sent) // TURNS_PER_THREAD
    assert len(committed_runs(history_root)) == 1
    assert resumed_sessions < threads  # only the first sent, and only what the journal lacked
    assert journals(isolated_state) == []


@pytest.mark.slow
def test_a_sigkill_costs_at_most_the_sessions_in_flight(tmp_path: Path, isolated_state: Path) -> None:
    threads, concurrency = 60, 4
    total = threads * TURNS_PER_THREAD
    cases = write_threads(tmp_path / "threads.jsonl", threads)
    with served_reference() as server:
        common = arguments(server, cases, concurrency)
        kill_when(common, lambda: requests_served(server) >= total // 2)
        sent_before_kill = requests_served(server)
        resumed = run_cli([*common, "--resume"])
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        sent_by_resume = requests_served(server) - sent_before_kill
    paid_twice = sent_before_kill + sent_by_resume - total
    # A session in flight when the kill came is sent again whole; no answered one is.
    assert 0 <= paid_twice <= concurrency * TURNS_PER_THREAD, (sent_before_kill, sent_by_resume)
