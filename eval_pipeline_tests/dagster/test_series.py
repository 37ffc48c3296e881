"""Series identity under concurrency: runs of different runtimes, case sets and processes never
mix, every run ends, and CLI runs are found under the lane's job with their tags.

These tests start real ``eval-pipeline`` processes against one DAGSTER_HOME and history root.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.core.settings import history_root
from eval_pipeline.dagster_wiring.code_location import REPOSITORY_LABEL, build_definitions
from eval_pipeline.dagster_wiring.launch import REPOSITORY_TAG, ensure_instance, materialize_lane
from eval_pipeline.dagster_wiring.outcomes import LaneOutcome
from eval_pipeline.dagster_wiring.partitions import partition_key, register_series
from eval_pipeline.dagster_wiring.schedules import job_name
from eval_pipeline.dagster_wiring.tags import DATE_TAG, LANE_TAG, PID_TAG, SERIES_TAG
from eval_pipeline.history import connect
from eval_pipeline.lanes import find_lane
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline_tests.lane_requests import lane_request

pytestmark = pytest.mark.slow

LANE = "deterministic_fluency"
NIGHT = "2026-11-30"


def turns_of(split: str) -> int:
    """How many turns one run of the lane's split drives (measured in-process, without Dagster)."""
    return len(evaluate_lane(find_lane(LANE), split, build_runtime("reference")).transcripts)


PUBLIC_TURNS = turns_of("public")


def cli(*args: str) -> subprocess.Popen[str]:
    """Start ``eval-pipeline`` in its own process (same environment: DAGSTER_HOME, history)."""
    return subprocess.Popen(
        [sys.executable, "-c", "from eval_pipeline.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def lane_runs(*args: str) -> list[dict[str, object]]:
    """Start one ``run --json`` per argument list at once; their lane entries, in order."""
    processes = [cli("run", "--lane", LANE, "--date", NIGHT, "--json", *a.split()) for a in args]
    documents = []
    for process in processes:
        code, out, err = finish(process)
        assert code == 0, err[-2000:]
        documents.append(json.loads(out)["lanes"][0])
    return documents


def test_two_runtimes_started_together_keep_their_own_rows_and_results() -> None:
    glossed, bare = lane_runs("--runtime reference", "--runtime reference-no-gloss")
    assert (glossed["runtime"], bare["runtime"]) == ("reference", "reference-no-gloss")
    assert glossed["metrics"]["no_dotted_inventory_rate"] == pytest.approx(14 / 15)
    assert bare["metrics"]["no_dotted_inventory_rate"] == pytest.approx(5 / 15)
    with connect(history_root()) as con:
        for table in ("metrics", "case_predicates", "transcripts"):
            rows = con.execute(f"SELECT DISTINCT run_id, runtime FROM {table} ORDER BY runtime").fetchall()
            assert rows == [(glossed["run_id"], "reference"), (bare["run_id"], "reference-no-gloss")], table
        turns = dict(con.execute("SELECT runtime, count(*) FROM transcripts GROUP BY runtime").fetchall())
    assert turns == {"reference": PUBLIC_TURNS, "reference-no-gloss": PUBLIC_TURNS}


def test_four_concurrent_runs_of_one_series_complete_with_their_own_rows() -> None:
    outcomes = lane_runs(*["--runtime reference"] * 4)  # one partition, four processes at once
    run_ids = {str(o["run_id"]) for o in outcomes}
    assert len(run_ids) == 4
    with connect(history_root()) as con:
        counts = dict(con.execute("SELECT run_id, count(*) FROM transcripts GROUP BY run_id").fetchall())
        committed = {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
    assert counts == dict.fromkeys(run_ids, PUBLIC_TURNS)
    assert committed == run_ids
    assert all(o["metrics"]["no_dotted_inventory_rate"] == pytest.approx(14 / 15) for o in outcomes)


def test_parallel_first_runs_on_a_fresh_dagster_home_all_succeed(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh_home"  # no folder, no dagster.yaml: the CLI creates both
    os.environ["DAGSTER_HOME"] = str(fresh)
    try:
        outcomes = lane_runs(*["--split dev"] * 4)
    finally:
        os.environ.pop("DAGSTER_HOME")
    assert len({o["run_id"] for o in outcomes}) == 4


KILL_DURING_APPEND = textwrap.dedent(
    """
    import os, signal, sys
    import eval_pipeline.history as history
    from eval_pipeline.history import store

    real_append = store.append_run
    kill_after = sys.argv[1]

    def append_then_die(root, table, df, **kwargs):
        written = real_append(root, table, df, **kwargs)
        if table == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return written

    store.append_run = history.append_run = append_then_die
    sys.argv = ["eval-pipeline", *sys.argv[2:]]
    from eval_pipeline.cli import main
    main()
    """
)


def test_a_kill_during_the_history_append_leaves_no_partial_run() -> None:
    args = ["run", "--lane", LANE, "--split", "dev", "--date", NIGHT]
    for last_written in ("metrics", "case_predicates", "transcripts"):  # killed after each table in turn
        killed = subprocess.run(
            [sys.executable, "-c", KILL_DURING_APPEND, last_written, *args], capture_output=True, text=True
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        assert list(Path(history_root()).glob(f"{last_written}/**/*.parquet"))  # the kill came after a write
        with connect(history_root()) as con:
            for view in ("runs", "metrics", "case_predicates", "transcripts"):
                assert con.execute(f"SELECT count(*) FROM {view}").fetchone() == (0,), (last_written, view)

    rerun = subprocess.run(
        [sys.executable, "-c", "from eval_pipeline.cli import main; main()", *args, "--json"],
        capture_output=True,
        text=True,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    run_id = json.loads(rerun.stdout)["lanes"][0]["run_id"]
    with connect(history_root()) as con:
        for view in ("runs", "metrics", "case_predicates", "transcripts"):
            assert con.execute(f"SELECT DISTINCT run_id FROM {view}").fetchall() == [(run_id,)], view
    # The killed runs do not stay STARTED: the next CLI start found their process gone.
    instance = ensure_instance()
    statuses = {
        r.run_id: r.status for r in instance.get_runs(dg.RunsFilter(job_name=job_name(find_lane(LANE))))
    }
    assert statuses.pop(run_id) == dg.DagsterRunStatus.SUCCESS
    assert list(statuses.values()) == [dg.DagsterRunStatus.FAILURE] * 3


def materialize(runtime: str, split: str = "public", **kwargs: str) -> LaneOutcome:
    """One run in this process, the way the CLI does it (the CLI's own processes are tested above)."""
    return materialize_lane(
        find_lane(LANE),
        find_target(runtime),
        lane_request(split, NIGHT, **kwargs),
        instance=ensure_instance(),
    )


def test_a_custom_case_file_is_its_own_series_and_leaves_the_nightly_regression_alone(tmp_path: Path) -> None:
    mine = tmp_path / "mine.jsonl"
    mine.write_text(
        json.dumps(
            {
                "id": "mine_001",
                "prompt": "What is courage?",
                "category": "pack_definition",
                "expected_predicates": ["no_placeholder"],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    first = materialize("reference")
    custom = materialize("reference", cases_path=str(mine))
    second = materialize("reference")
    assert all(o.failure is None for o in (first, custom, second))
    assert custom.case_set.startswith("custom-") and custom.split == "public"
    assert first.case_set == second.case_set == "public"
    with connect(history_root()) as con:
        series = con.execute("SELECT run_id, case_set, seq FROM runs ORDER BY started_at").fetchall()
    assert series == [
        (first.run_id, "public", 1),
        (custom.run_id, custom.case_set, 1),
        (second.run_id, "public", 2),
    ]
    regression = next(c for c in second.checks if c.name == "no_regression")
    assert regression.passed
    instance = ensure_instance()
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey([LANE, "history"]), "no_regression")]
    )
    evaluation = next(iter(record.values())).event.dagster_event.event_specific_data  # type: ignore[union-attr]
    assert evaluation.metadata["previous_run_id"].value == first.run_id


def test_cli_runs_are_runs_of_the_lane_job_with_one_materialization_series_per_runtime() -> None:
    lane_runs("--runtime reference", "--runtime reference-no-gloss")
    materialize("reference")
    instance = ensure_instance()
    # What the UI's job page asks for: the job's runs in this code location.
    runs = instance.get_runs(dg.RunsFilter(job_name=f"{LANE}_job", tags={REPOSITORY_TAG: REPOSITORY_LABEL}))
    assert len(runs) == 3
    assert {r.tags["dagster/partition/runtime"] for r in runs} == {"reference", "reference-no-gloss"}
    assert all(r.tags[LANE_TAG] == LANE and r.tags["eval_pipeline/date"] == NIGHT for r in runs)
    assert all(r.tags[SERIES_TAG].startswith(f"{LANE}/public/") for r in runs)
    assert all(PID_TAG in r.tags for r in runs)
    # The tag strip shows at most six tags (partition, night, verdict); the rest are hidden.
    for r in runs:
        shown = sorted(k for k in r.tags if not k.startswith(".dagster/"))
        assert len(shown) <= 6, shown
        assert r.tags["eval_pipeline/verdict"] in {"pass", "fail", "warn"}
    metrics_key = dg.AssetKey([LANE, "metrics"])
    for runtime, expected in (("reference", 2), ("reference-no-gloss", 1)):
        key = str(partition_key("public", runtime))
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=metrics_key, asset_partitions=[key]), limit=10
        ).records
        assert len(records) == expected, runtime
        assert {r.asset_materialization.metadata["runtime"].value for r in records} == {runtime}  # type: ignore[union-attr]


def test_the_lane_job_runs_with_the_launchpad_defaults() -> None:
    """The UI path: the lane job with the code location's own resources and no run config."""
    spec = find_lane(LANE)
    instance = ensure_instance()
    register_series(instance, LANE, ["dev"], ["reference-no-gloss"])
    result = (
        build_definitions([spec])
        .resolve_job_def(job_name(spec))
        .execute_in_process(instance=instance, partition_key=partition_key("dev", "reference-no-gloss"))
    )
    assert result.success
    metrics = result.asset_value(dg.AssetKey([LANE, "metrics"]))
    assert set(metrics["runtime"]) == {"reference-no-gloss"} and set(metrics["case_set"]) == {"dev"}
    # Launched without a night, the run is tagged with the one it was filed under.
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    assert {run.tags[DATE_TAG]} == {str(d)[:10] for d in metrics["partition_date"]}
