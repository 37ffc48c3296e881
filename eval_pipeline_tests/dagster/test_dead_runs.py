"""A run whose process was killed is marked failed by the next command on the host, whether it
was left STARTED or, killed between its creation and its start, NOT_STARTED or STARTING."""

from __future__ import annotations

import socket
import subprocess
import sys

import dagster as dg
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.dagster_wiring.launch import ensure_instance
from eval_pipeline.dagster_wiring.tags import HOST_TAG, PID_TAG

runner = CliRunner()


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(timeout=30)
    return process.pid


def leave_runs(instance: dg.DagsterInstance, pid: int) -> dict[dg.DagsterRunStatus, str]:
    """One run per unfinished status, of this host and process ``pid``, as a kill leaves them."""
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(pid)}
    left = {}
    for status in (
        dg.DagsterRunStatus.NOT_STARTED,
        dg.DagsterRunStatus.STARTING,
        dg.DagsterRunStatus.STARTED,
    ):
        run = instance.add_run(dg.DagsterRun(job_name="killed_job", status=status, tags=tags))
        left[status] = run.run_id
    return left


@pytest.mark.parametrize(
    "command",
    [["validate"], ["history"], ["history", "--format", "json"]],
    ids=["validate", "history", "history-json"],
)
def test_the_next_command_marks_a_dead_processes_runs_failed(command: list[str]) -> None:
    instance = ensure_instance()
    left = leave_runs(instance, dead_pid())
    alive = leave_runs(instance, 1)  # pid 1 always lives: its runs are not touched
    result = runner.invoke(app, command)
    assert result.exit_code == 0, (result.output, result.exception)
    for status, run_id in left.items():
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == dg.DagsterRunStatus.FAILURE, status
    for status, run_id in alive.items():
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == status
