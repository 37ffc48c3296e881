"""One upstream runner run: a child process of the checkout's own interpreter, with a fresh
engine-state folder and a deadline, its output read strictly.

Whatever goes wrong (no interpreter, the runner raised, it hung past its deadline, it wrote
something that is not a report, or a detail per case) is a :class:`RunnerOutcome` with a
``failure`` in words, never an exception: the run it belongs to is then void, and says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.lanes.runner_spec import RunnerSpec

CHILD = Path(__file__).with_name("child.py")
TRACEBACK_LINES = 4  # the last lines of a runner's traceback a failure quotes
STDERR_KEPT = 64 * 1024


@dataclass(frozen=True)
class RunnerOutcome:
    """What one runner run gave: its report's metrics and one detail per case, or a failure."""

    metrics: Mapping[str, Any]
    details: Sequence[Mapping[str, Any]] | None
    failure: str | None
    seconds: float


def _failed(reason: str, started: float) -> RunnerOutcome:
    return RunnerOutcome({}, None, reason, time.monotonic() - started)


def run_runner(
    runner: RunnerSpec, lane_folder: Path, cases: Sequence[Mapping[str, Any]], deadline_s: float | None = None
) -> RunnerOutcome:
    """Run ``runner`` over ``cases`` (dicts, in order) and read its report strictly."""
    started = time.monotonic()
    try:
        checkout = runner.checkout_path(lane_folder)
    except ValueError as exc:
        return _failed(str(exc), started)
    python = runner.interpreter(checkout)
    if not runner.runner_file(checkout).is_file():
        return _failed(f"{runner.runner_file(checkout)} does not exist", started)
    if not os.access(python, os.X_OK):
        return _failed(f"the checkout's interpreter {python} is not there: set runner.python", started)
    drop = runner.id_field if runner.added_id else None
    with tempfile.TemporaryDirectory(prefix="eval-pipeline-runner-") as scratch:
        request, output = Path(scratch, "request.json"), Path(scratch, "report.json")
        request.write_text(
            json.dumps(
                {
                    "checkout": str(checkout),
                    "lane": runner.lane,
                    "cases": list(cases),
                    "kwargs": runner.kwargs,
                    "drop": drop,
                }
            ),
            encoding="utf-8",
        )
        state = Path(scratch, "engine_state")
        state.mkdir()
        env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1"}
        if runner.state_env:
            env[runner.state_env] = str(state)
        limit = deadline_s if deadline_s is not None else runner.deadline_s
        failure = _run_child([str(python), str(CHILD), str(request), str(output)], checkout, env, limit)
        if failure is not None:
            return _failed(failure, started)
        return _read_report(output, cases, runner.id_field if not runner.added_id else None, started)


def _run_child(command: list[str], cwd: Path, env: dict[str, str], deadline_s: float) -> str | None:
    """Run the child in its own process group; None when it exited 0, else why not. At the
    deadline the whole group (the runner's own worker processes too) is killed."""
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return f"the runner did not finish within its deadline of {deadline_s:g} s: stopped"
        finally:
            _kill_group(process)  # a worker it left behind goes with it
        if code == 0:
            return None
        stderr.seek(0, os.SEEK_END)
        size = stderr.tell()
        stderr.seek(max(0, size - STDERR_KEPT))
        tail = stderr.read().decode("utf-8", "replace").strip().splitlines()
    last = " | ".join(line.strip() for line in tail[-TRACEBACK_LINES:]) or "(nothing on stderr)"
    return f"the runner failed (exit {code}): {last}"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _read_report(
    output: Path, cases: Sequence[Mapping[str, Any]], id_field: str | None, started: float
) -> RunnerOutcome:
    """The report the child wrote, checked: an object with ``metrics`` (an object) and
    ``case_details`` (one object per case, in order; carrying the case's id when it has one)."""
    try:
        report = json.loads(output.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return _failed(f"the runner's report could not be read: {exc}", started)
    metrics, details = report.get("metrics"), report.get("case_details")
    if not isinstance(metrics, dict):
        return _failed(f"the runner's report.metrics is {type(metrics).__name__}, not an object", started)
    if not isinstance(details, list) or not all(isinstance(d, dict) for d in details):
        return _failed("the runner's report.case_details is not a list of objects", started)
    if len(details) != len(cases):
        return _failed(f"the runner gave {len(details)} case details for {len(cases)} cases", started)
    if id_field is not None:
        for position, (case, detail) in enumerate(zip(cases, details, strict=True)):
            if id_field in detail and str(detail[id_field]) != str(case[id_field]):
                return _failed(
                    f"case detail {position} is of case {detail[id_field]!r}, not {case[id_field]!r}: "
                    "details must come in the cases' order",
                    started,
                )
    return RunnerOutcome(metrics, details, None, time.monotonic() - started)
