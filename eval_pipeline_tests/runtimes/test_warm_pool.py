"""One warm worker pool per invocation: a `python:` runtime's workers start once for every
lane of an `eval-pipeline run`, and a crashed worker is restarted (its turn is a fault)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.settings import PROJECT_ROOT

pytestmark = pytest.mark.slow

BOT = "python:eval_pipeline_tests.runtimes.slow_start_bot:SlowStartBot"


def run_cli(log: Path, *args: str, crash_prompt: str = "") -> tuple[int, dict[str, object], set[int]]:
    """Run the CLI; (exit code, --json document, pids of the worker processes that started)."""
    executable = Path(sys.executable).parent / "eval-pipeline"
    env = {
        **os.environ,
        "SLOW_START_S": "1",
        "SLOW_START_LOG": str(log),
        "SLOW_CRASH_PROMPT": crash_prompt,
        "PYTHONPATH": str(PROJECT_ROOT),
    }
    command = [str(executable), "run", "--runtime", BOT, "-o", "workers=2", "--json", *args]
    child = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=600)
    started = {int(line) for line in log.read_text().split()} - {child.pid}  # the CLI imports it to check it
    return child.returncode, json.loads(out), started


TWO_LANES = ("--lane", "deterministic_fluency", "--lane", "refusal_calibration", "--split", "dev")


def test_two_lanes_share_one_pool_so_each_worker_starts_once(tmp_path: Path) -> None:
    code, document, started = run_cli(tmp_path / "starts.log", *TWO_LANES)
    assert code in (0, 1), document  # ran and judged (the bot is the reference: checks may fail)
    lanes = document["lanes"]
    assert isinstance(lanes, list) and len(lanes) == 2, document
    assert all(not lane["faults"] for lane in lanes), lanes
    assert all(lane["turn_predicates"] or lane["case_predicates"] for lane in lanes)
    # Two workers for two lanes: without the shared pool each lane would start its own two.
    assert len(started) == 2, started


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
