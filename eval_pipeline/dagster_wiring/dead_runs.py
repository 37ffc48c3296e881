"""Runs whose process died: marked failed by the next command that starts on the same host.

A CLI run executes in the ``eval-pipeline`` process that launched it and is tagged with that
process's host and pid. Killed (SIGKILL, out of memory) it leaves its run in the instance as it
was: ``STARTED``, or ``NOT_STARTED`` / ``STARTING`` when the kill came between the run's creation
and its start. Nothing would ever end such a run, so every command that reads the instance or
history (``run``, ``history``, ``validate``) first marks this host's runs whose process is gone
as failed.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from eval_pipeline.dagster_wiring.tags import HOST_TAG, PID_TAG

if TYPE_CHECKING:  # Dagster is loaded only when an instance exists to be looked at
    import dagster as dg


def fail_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark this host's unfinished runs whose process no longer exists as FAILED; their ids."""
    import dagster as dg

    unfinished = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    host = socket.gethostname()
    failed = []
    for run in instance.get_runs(dg.RunsFilter(statuses=unfinished, tags={HOST_TAG: host})):
        pid = run.tags.get(PID_TAG, "")
        if pid.isdigit() and not _alive(int(pid)):
            instance.report_run_failed(run, f"the process that ran it (pid {pid} on {host}) is gone")
            failed.append(run.run_id)
    return failed


def fail_dead_runs_of_existing_instance() -> list[str]:
    """:func:`fail_dead_runs` on the local instance, if one exists (none is created for it)."""
    import dagster as dg

    from eval_pipeline.settings import dagster_home

    home = dagster_home()
    if not (home / "dagster.yaml").is_file():
        return []
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
