"""One warm worker pool per invocation: a `python:` runtime's workers start once for every
lane of an `eval-pipeline run`, and a crashed worker is restarted (its turn is a fault)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline_tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow

BOT = "python:eval_pipeline_tests.runtimes.slow_start_bot:SlowStartBot"


def cli(
    log: Path, *args: str, runtime: str = BOT, crash_prompt: str = ""
) -> tuple[subprocess.CompletedProcess[str], set[int]]:
    """Run the CLI with a two-worker ``python:`` runtime; (the process, pids that imported the bot)."""
    executable = Path(sys.executable).parent / "eval-pipeline"
    env = {
        **os.environ,
        "SLOW_START_S": "1",
        "SLOW_START_LOG": str(log),
        "SLOW_CRASH_PROMPT": crash_prompt,
        "PYTHONPATH": str(PROJECT_ROOT),
    }
    command = [str(executable), "run", "--runtime", runtime, "-o", "workers=2", "--json", *args]
    done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    started = {int(line) for line in log.read_text().split()} if log.exists() else set()
    return done, started


def run_cli(log: Path, *args: str, crash_prompt: str = "") -> tuple[int, dict[str, object], set[int]]:
    """Run the CLI; (exit code, --json document, pids of the worker processes that started)."""
    done, started = cli(log, *args, crash_prompt=crash_prompt)
    return done.returncode, json.loads(done.stdout), started


TWO_LANES = ("--lane", "deterministic_fluency", "--lane", "refusal_calibration", "--split", "dev")


def test_two_lanes_share_one_pool_so_each_worker_starts_once(tmp_path: Path) -> None:
    code, document, started = run_cli(tmp_path / "starts.log", *TWO_LANES)
    assert code in (0, 1), document  # ran and judged (the bot is the reference: checks may fail)
    lanes = document["lanes"]
    assert isinstance(lanes, list) and len(lanes) == 2, document
    assert all(not lane["faults"] for lane in lanes), lanes
    assert all(lane["turn_predicates"] or lane["case_predicates"] for lane in lanes)
    # Two workers for two lanes: without the shared pool each lane would start its own two. The
    # CLI checks the spec from the module's source: it never pays the bot's start-up itself.
    assert len(started) == 2, started


@pytest.mark.parametrize(
    ("runtime", "reason"),
    [
        ("python:eval_pipeline_tests.runtimes.slow_start_bot:Nope", "has no attribute 'Nope'"),
        ("python:no_such_module_here:bot", "cannot import 'no_such_module_here'"),
        ("python:eval_pipeline_tests.runtimes.slow_start_bot", "needs python:package.module:factory"),
    ],
)
def test_a_wrong_python_spec_is_bad_input_before_any_worker_starts(
    tmp_path: Path, runtime: str, reason: str
) -> None:
    done, started = cli(tmp_path / "starts.log", *TWO_LANES, runtime=runtime)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert reason in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not started, started


def test_a_crashed_worker_is_restarted_and_its_turn_is_a_fault(tmp_path: Path) -> None:
    code, document, started = run_cli(
        tmp_path / "starts.log",
        *TWO_LANES,
        crash_prompt="What is a zorblat?",
    )
    assert code == 4, document  # one of fluency's two dev turns faulted: that run is void
    fluency, refusal = document["lanes"]  # type: ignore[misc]
    faults = fluency["faults"]
    assert [f["turns"] for f in faults] == [1], faults
    assert "runtime_exited" in faults[0]["fault"] or "exited" in faults[0]["fault"], faults
    assert not refusal["faults"], refusal["faults"]  # the next lane ran on the restarted pool
    assert len(started) == 3, started  # two workers, one restart
