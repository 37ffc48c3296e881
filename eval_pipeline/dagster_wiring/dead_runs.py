"""Runs whose process died: marked failed by the next command that starts on the same host.

A CLI run executes in the ``eval-pipeline`` process that launched it and is tagged with that
process's host and pid. Killed (SIGKILL, out of memory) it leaves its run in the instance as it
was: ``STARTED``, or ``NOT_STARTED`` / ``STARTING`` when the kill came between the run's creation
and its start. Nothing would ever end such a run, so every command that reads the instance or
history (``run``, ``history``, ``validate``) first marks this host's runs whose process is gone
as failed.

Looking costs Dagster's import and an instance, which a command that only reads files
(``validate``, ``history``) would otherwise not pay. So a process that may create runs says so
first: it leaves a file named after its host and pid in the instance folder (:func:`mark_live`),
removed when it exits normally. The instance is opened only when such a file names a process
that is gone, the trace a kill leaves.
"""

from __future__ import annotations

import atexit
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.dagster_wiring.tags import HOST_TAG, PID_TAG

if TYPE_CHECKING:  # Dagster is loaded only when an instance exists to be looked at
    import dagster as dg

LIVE_FOLDER = ".eval_pipeline_live"  # in the instance folder: one empty file per process that may run


def mark_live(home: Path) -> None:
    """Note that this process may create runs in the instance at ``home`` (until it exits)."""
    folder = home / LIVE_FOLDER
    folder.mkdir(exist_ok=True)
    path = folder / f"{socket.gethostname()}-{os.getpid()}"
    if not path.exists():  # once a process
        path.touch()
        atexit.register(path.unlink, missing_ok=True)


def gone_processes(home: Path) -> list[Path]:
    """The files of this host's processes that marked themselves live and no longer exist."""
    prefix = f"{socket.gethostname()}-"
    gone = []
    for path in (home / LIVE_FOLDER).glob(f"{prefix}*"):
        pid = path.name.removeprefix(prefix)
        if pid.isdigit() and not _alive(int(pid)):
            gone.append(path)
    return gone


def fail_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark this host's unfinished runs whose process no longer exists as FAILED; their ids."""
    import dagster as dg

    gone = gone_processes(Path(instance.root_directory)) if instance.root_directory else []
    unfinished = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    host = socket.gethostname()
    failed = []
    for run in instance.get_runs(dg.RunsFilter(statuses=unfinished, tags={HOST_TAG: host})):
        pid = run.tags.get(PID_TAG, "")
        if pid.isdigit() and not _alive(int(pid)):
            instance.report_run_failed(run, f"the process that ran it (pid {pid} on {host}) is gone")
            failed.append(run.run_id)
    for path in gone:  # their runs are failed now
        path.unlink(missing_ok=True)
    return failed


def fail_dead_runs_of_existing_instance() -> list[str]:
    """:func:`fail_dead_runs` on the local instance, if one exists (none is created for it) and a
    process that marked itself live there is gone."""
    from eval_pipeline.core.settings import dagster_home

    home = dagster_home()
    if not (home / "dagster.yaml").is_file() or not gone_processes(home):
        return []
    import dagster as dg

    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with dg.DagsterInstance.get() as instance:
            return fail_dead_runs(instance)
    finally:
        if previous is None:
            del os.environ["DAGSTER_HOME"]
        else:
            os.environ["DAGSTER_HOME"] = previous


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
