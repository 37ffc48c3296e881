"""A run whose process was killed is marked failed by the next command on the host, whether it
was left STARTED or, killed between its creation and its start, NOT_STARTED or STARTING."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.dagster_wiring.dead_runs import LIVE_FOLDER
from eval_pipeline.dagster_wiring.launch import ensure_instance
from eval_pipeline.dagster_wiring.tags import HOST_TAG, PID_TAG

runner = CliRunner()


# A process that may create runs marks itself live, then is killed: what a killed `run` leaves.
KILLED_RUNNER = """
import os, signal
from pathlib import Path
from eval_pipeline.dagster_wiring.dead_runs import mark_live
mark_live(Path(os.environ["DAGSTER_HOME"]))
os.kill(os.getpid(), signal.SIGKILL)
"""


def dead_pid() -> int:
    """The pid of a process that marked itself live on the current instance and was killed."""
    process = subprocess.Popen([sys.executable, "-c", KILLED_RUNNER])
    assert process.wait(timeout=60) == -signal.SIGKILL
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


def test_a_gone_process_is_swept_once_and_a_command_that_finds_none_does_not_load_dagster() -> None:
    instance = ensure_instance()
    home = Path(instance.root_directory)
    pid = dead_pid()
    trace = home / LIVE_FOLDER / f"{socket.gethostname()}-{pid}"
    assert trace.exists()  # the kill left it
    left = leave_runs(instance, pid)
    assert runner.invoke(app, ["validate"]).exit_code == 0
    assert not trace.exists()  # its runs are failed: nothing left to look at
    assert all(instance.get_run_by_id(r).status == dg.DagsterRunStatus.FAILURE for r in left.values())  # type: ignore[union-attr]
    # With no gone process on record, validate reads files only: Dagster is never imported.
    probe = "import sys; from eval_pipeline.cli import main; sys.argv = ['eval-pipeline', 'validate']\n"
    probe += "try:\n    main()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
    probe += "assert 'dagster' not in sys.modules, 'validate imported dagster'\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
