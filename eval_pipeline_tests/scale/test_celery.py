"""Lane runs on Celery: a real Redis broker and two ``eval-pipeline worker`` processes on
127.0.0.1. A lane of each kind has tables equal to the in-process run's; two partitions of different
runtimes run at the same time, each on its target's queue, without mixing; a worker process
killed mid-step fails the run visibly and leaves no partial run in history."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from eval_pipeline.core.settings import CELERY_BROKER_ENV, EVALS_ENV, history_root
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.dagster_wiring.outcomes import LaneOutcome
from eval_pipeline.dagster_wiring.tags import LANE_TAG
from eval_pipeline.history.views import connect
from eval_pipeline.lanes import find_lane
from eval_pipeline.lanes.registry import discover_lanes
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline_tests.lane_requests import lane_request
from eval_pipeline_tests.metric_tables import untimed
from eval_pipeline_tests.paths import PROJECT_ROOT

from . import servers

# One xdist worker starts the cluster (Redis and two Celery workers) for all three tests.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("celery")]

LANE = "deterministic_fluency"
NO_GLOSS_QUEUE = "no-gloss"
# One lane of each way a lane is scored, for the Celery-equals-in-process test: a declared lane
# of single-turn cases, a declared lane of one warm session (rates over turns), and the lane a
# kind module scores.
EQUALITY_LANES = ("deterministic_fluency", "warmed_session_consistency", "i18n_prompt")
# Columns that differ between any two runs, whatever ran them.
PER_RUN_COLUMNS = ["run_id", "started_at", "latency_ms"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """Redis, an evals folder whose no-gloss target has its own queue, and two workers: w1 on
    the shared queue, w2 on the shared queue and the no-gloss one."""
    folder = tmp_path_factory.mktemp("celery")
    evals = folder / "evals"
    shutil.copytree(PROJECT_ROOT / "evals", evals)
    targets = evals / "runtimes.yaml"
    targets.write_text(
        targets.read_text().replace(
            "  reference-no-gloss:\n", f"  reference-no-gloss:\n    queue: {NO_GLOSS_QUEUE}\n"
        )
    )
    with servers.redis(folder / "redis") as broker:
        env = {CELERY_BROKER_ENV: broker, EVALS_ENV: str(evals)}
        queues = {"w1": ["dagster"], "w2": ["dagster", NO_GLOSS_QUEUE]}
        with servers.celery_workers(["w1", "w2"], queues, env, folder / "workers") as workers:
            yield {"env": env, "workers": workers}


@pytest.fixture
def on_cluster(cluster: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = dict(cluster["env"])  # type: ignore[call-overload]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def comparable(frame: pd.DataFrame | None) -> pd.DataFrame:
    assert frame is not None
    kept = frame.drop(columns=[c for c in PER_RUN_COLUMNS if c in frame.columns])
    return kept.sort_values(list(kept.columns[:3])).reset_index(drop=True)


def run_lane(lane: str, split: str, runtime: str, executor: str) -> LaneOutcome:
    return materialize_lane(
        find_lane(lane),
        find_target(runtime),
        lane_request(split, "2026-11-30", executor=executor),
        instance=ensure_instance(),
    )


def workers_of(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """step key → the Celery worker that executed it (from the run's engine events)."""
    found = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        if event is None or event.step_key is None:
            continue
        worker = event.engine_event_data.metadata.get("Celery worker")
        if worker is not None:
            found[event.step_key] = str(worker.value)
    return found


def test_a_lane_of_each_kind_on_celery_equals_the_in_process_run(on_cluster: dict[str, str]) -> None:
    instance = ensure_instance()
    lanes = [spec for spec in discover_lanes() if spec.name in EQUALITY_LANES]
    assert [spec.name for spec in lanes] == sorted(EQUALITY_LANES)
    assert {spec.kind for spec in discover_lanes()} == {spec.kind for spec in lanes}
    for spec in lanes:
        split = spec.nightly_splits[0]
        local = run_lane(spec.name, split, "reference", "in_process")
        celery = run_lane(spec.name, split, "reference", "celery")
        assert local.success and celery.success, (spec.name, local.failure, celery.failure)
        for stage in ("metrics", "turn_predicates", "case_predicates"):
            on_celery, on_local = getattr(celery, stage), getattr(local, stage)
            if stage == "metrics":  # the runtime's timings differ from run to run
                on_celery, on_local = untimed(on_celery), untimed(on_local)
            pd.testing.assert_frame_equal(
                comparable(on_celery),
                comparable(on_local),
                obj=f"{spec.name} {stage}",
            )
        assert [(c.name, c.passed) for c in celery.checks] == [(c.name, c.passed) for c in local.checks]
        stepped = workers_of(instance, celery.run_id)
        assert set(stepped) == {
            f"{spec.name}__{s}"
            for s in ("cases", "transcripts", "turn_predicates", "case_predicates", "metrics", "history")
        }
    with connect(history_root()) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (2 * len(lanes),)


def cli_run(runtime: str, env: dict[str, str], *extra: str, as_json: bool = True) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            servers.EVAL_PIPELINE,
            "run",
            "--lane",
            LANE,
            "--split",
            "public",
            "--runtime",
            runtime,
            "--executor",
            "celery",
            *(["--json"] if as_json else []),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def test_two_runtimes_run_at_once_each_on_its_queue(on_cluster: dict[str, str]) -> None:
    expected = {
        name: run_lane(LANE, "public", name, "in_process") for name in ("reference", "reference-no-gloss")
    }
    launched = {name: cli_run(name, on_cluster) for name in expected}
    documents = {}
    for name, process in launched.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        documents[name] = json.loads(stdout)["lanes"][0]
    instance = ensure_instance()
    records = {name: instance.get_run_record_by_id(doc["run_id"]) for name, doc in documents.items()}
    a, b = (records[name] for name in expected)
    assert a is not None and b is not None
    assert a.start_time < b.end_time and b.start_time < a.end_time, "the two runs did not overlap"
    for name, doc in documents.items():
        assert doc["runtime"] == name
        rows = pd.DataFrame(doc["case_predicates"])
        assert set(rows["runtime"]) == {name}
        pd.testing.assert_frame_equal(
            comparable(rows)[["case_id", "predicate", "passed"]].astype(object),
            comparable(expected[name].case_predicates)[["case_id", "predicate", "passed"]].astype(object),
            obj=name,
        )
    no_gloss_workers = set(workers_of(instance, documents["reference-no-gloss"]["run_id"]).values())
    assert no_gloss_workers == {"celery@w2"}  # only w2 serves the no-gloss queue
    with connect(history_root()) as con:
        stored = con.execute(
            "SELECT runtime, run_id FROM runs WHERE lane = ? ORDER BY runtime", [LANE]
        ).fetchall()
    assert [r for r in stored if r[1] in {d["run_id"] for d in documents.values()}] == sorted(
        (name, doc["run_id"]) for name, doc in documents.items()
    )


def test_a_worker_killed_mid_step_fails_the_run_and_history_gains_nothing(
    on_cluster: dict[str, str], cluster: dict[str, object], tmp_path: Path
) -> None:
    server = subprocess.Popen(
        [servers.EVAL_PIPELINE, "serve-reference", "--port", "0", "--latency-ms", "400"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[1]
        runtime = f"openai:{url}"
        run = cli_run(runtime, on_cluster, "-o", "model=reference", "--concurrency", "1", as_json=False)
        instance = ensure_instance()
        run_id = _wait_for_step(instance, f"{LANE}__transcripts", timeout_s=120)
        time.sleep(1.0)  # well inside the step: 16 turns at 400 ms each
        workers = cluster["workers"]
        for worker in workers.values():  # type: ignore[attr-defined]
            for pid in worker.pool_pids():
                os.kill(pid, signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=300)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert run.returncode == 3, (stdout, stderr)
    assert "run failed" in stderr and "WorkerLostError" in stderr, stderr
    record = instance.get_run_record_by_id(run_id)
    assert record is not None and record.dagster_run.status == dg.DagsterRunStatus.FAILURE
    with connect(history_root()) as con:
        assert con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone() == (0,)
    leftovers = [p for p in Path(history_root()).rglob("*") if run_id in p.name]
    assert leftovers == []


def _wait_for_step(instance: dg.DagsterInstance, step_key: str, timeout_s: float) -> str:
    """The id of the latest run once its ``step_key`` has started."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for run in instance.get_runs(dg.RunsFilter(tags={LANE_TAG: LANE}), limit=1):
            started = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
            if any(r.dagster_event and r.dagster_event.step_key == step_key for r in started):
                return run.run_id
        time.sleep(0.2)
    raise TimeoutError(f"no run started {step_key} within {timeout_s:g} s")
