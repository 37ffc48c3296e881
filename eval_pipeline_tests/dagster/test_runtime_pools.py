"""Per-runtime concurrency pools under the queued run coordinator.

Three runs of a lane against a target with ``pool_limit: 1`` are submitted to the run queue of a
temporary instance (room for three runs at once) and executed by a real ``dagster-daemon``: the
runs start together, but only one drives the runtime at a time; the others wait in the pool
``runtime-slow``. The runtime itself (an ``exec:`` child) records when it answered, so the
test sees from both sides that driving never overlapped.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.dagster_wiring.partitions import register_series
from eval_pipeline.dagster_wiring.runtime_targets import pool_name
from eval_pipeline_tests.dagster.processes import BIN, daemon
from eval_pipeline_tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow

LANE = "deterministic_fluency"
RUNS = 3
LIMIT = 1
RUN_TIMEOUT_S = 420.0

# The reference runtime behind the exec: protocol, slowly (a rate-limited API), logging each answer.
SLOW_BOT = """
import json, os, sys, time
from eval_pipeline.runtimes.reference import ReferenceRuntime
runtime, sessions, log = ReferenceRuntime(), {}, sys.argv[1]
for line in sys.stdin:
    request = json.loads(line)
    started = time.time()
    time.sleep(1.5)
    session = sessions.setdefault(request["session"], runtime.open_session(request["session"]))
    answer = session.send(request["prompt"])
    with open(log, "a") as out:
        out.write(json.dumps({"pid": os.getpid(), "start": started, "end": time.time()}) + "\\n")
    fields = ("surface", "grounding_source", "surface_tag", "epistemic_status")
    reply = {"id": request["id"], **{f: getattr(answer, f) for f in fields if getattr(answer, f) is not None}}
    print(json.dumps(reply), flush=True)
"""


def windows(log: Path) -> list[tuple[float, float]]:
    """Per child process (one per run): the time from its first request to its last answer."""
    spans: dict[int, list[float]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        turn = json.loads(line)
        span = spans.setdefault(turn["pid"], [turn["start"], turn["end"]])
        span[0], span[1] = min(span[0], turn["start"]), max(span[1], turn["end"])
    return sorted((start, end) for start, end in spans.values())


def test_a_runtime_pool_lets_one_run_at_a_time_drive_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(os.environ["DAGSTER_HOME"])
    config = (PROJECT_ROOT / "dagster.yaml").read_text(encoding="utf-8")
    (home / "dagster.yaml").write_text(
        config.replace("max_concurrent_runs: 2", f"max_concurrent_runs: {RUNS}"), encoding="utf-8"
    )
    evals = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals" / LANE, evals / LANE)
    bot, turns = tmp_path / "slow_bot.py", tmp_path / "turns.jsonl"
    bot.write_text(textwrap.dedent(SLOW_BOT), encoding="utf-8")
    (evals / "runtimes.yaml").write_text(
        f"targets:\n  slow:\n    spec: 'exec:{sys.executable} {bot} {turns}'\n    pool_limit: {LIMIT}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
    instance = dg.DagsterInstance.get()
    register_series(instance, LANE, ["dev"], ["slow"])

    partition = {"dagster/partition": "dev|slow", "dagster/partition/case_set": "dev"}
    tags = json.dumps({**partition, "dagster/partition/runtime": "slow"})
    launches = [
        subprocess.Popen(
            [
                str(BIN / "dagster"),
                "job",
                "launch",
                "-w",
                "workspace.yaml",
                "-j",
                f"{LANE}_job",
                "--tags",
                tags,
            ],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(RUNS)
    ]
    for launch in launches:
        output, _ = launch.communicate(timeout=300)
        assert launch.returncode == 0, output[-2000:]
    runs = instance.get_runs(dg.RunsFilter(job_name=f"{LANE}_job"))
    assert len(runs) == RUNS
    assert {r.status for r in runs} == {dg.DagsterRunStatus.QUEUED}  # nothing runs without the daemon

    pool = pool_name("slow")
    storage = instance.event_log_storage
    # Hold the pool's one slot from outside (another client of the same API), so every run's
    # transcripts step must queue in the pool however slowly the runs start on a loaded machine.
    storage.set_concurrency_slots(pool, LIMIT)
    assert storage.claim_concurrency_slot(pool, "outside-holder", "hold").is_claimed
    most_active = most_pending = most_started = 0
    with daemon(tmp_path / "daemon.log"):
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while storage.get_concurrency_info(pool).pending_step_count < RUNS:
            assert time.monotonic() < deadline, "the runs' transcripts steps never queued in the pool"
            time.sleep(0.3)
        most_pending = storage.get_concurrency_info(pool).pending_step_count
        assert not turns.exists()  # nobody drove the runtime while the slot was held
        storage.free_concurrency_slot_for_step("outside-holder", "hold")
        while True:
            statuses = [r.status for r in instance.get_runs(dg.RunsFilter(job_name=f"{LANE}_job"))]
            info = instance.event_log_storage.get_concurrency_info(pool)
            most_active = max(most_active, info.active_slot_count)
            most_pending = max(most_pending, info.pending_step_count)
            most_started = max(most_started, statuses.count(dg.DagsterRunStatus.STARTED))
            if all(s in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE) for s in statuses):
                break
            assert time.monotonic() < deadline, f"runs did not finish: {statuses}"
            time.sleep(0.3)

    assert {r.status for r in instance.get_runs(dg.RunsFilter(job_name=f"{LANE}_job"))} == {
        dg.DagsterRunStatus.SUCCESS
    }
    assert instance.event_log_storage.get_concurrency_info(pool).slot_count == LIMIT  # from runtimes.yaml
    assert most_active == LIMIT
    assert most_pending == RUNS  # every run's transcripts step waited in the pool ...
    assert most_started >= 2  # ... while its run was under way: the pool, not the run queue, held it
    spans = windows(turns)
    assert len(spans) == RUNS
    for (_, earlier_end), (later_start, _) in itertools.pairwise(spans):
        assert later_start >= earlier_end, spans
