"""Snapshot of the definitions surface: a renamed asset key or check orphans history, so it must show."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.dagster_wiring.code_location import build_definitions
from eval_pipeline.dagster_wiring.schedules import NIGHTLY_CRON
from eval_pipeline.lanes import discover_lanes
from eval_pipeline_tests.paths import PROJECT_ROOT

STAGES = ["case_predicates", "cases", "history", "metrics", "transcripts", "turn_predicates"]


@pytest.fixture(scope="module")
def defs() -> dg.Definitions:
    return build_definitions()


def test_every_lane_has_its_six_stage_assets_and_the_runtime_targets_source(defs: dg.Definitions) -> None:
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    expected = {f"{spec.name}/{stage}" for spec in discover_lanes() for stage in STAGES}
    assert keys == expected | {"runtime_targets"}
    assert graph.get(dg.AssetKey("runtime_targets")).is_observable


def test_transcripts_depend_on_their_runtime_target_through_the_runtime_dimension(
    defs: dg.Definitions,
) -> None:
    graph = defs.resolve_asset_graph()
    source = dg.AssetKey("runtime_targets")
    for spec in discover_lanes():
        dependents = {k for k in graph.get(source).child_keys if k.path[0] == spec.name}
        assert dependents == {dg.AssetKey([spec.name, "transcripts"])}, spec.name
        parents = graph.get_parent_partition_keys_for_child(
            "dev|staging", source, dg.AssetKey([spec.name, "transcripts"])
        ).partitions_subset.get_partition_keys()
        assert list(parents) == ["staging"]


def test_each_lanes_metrics_fail_freshness_after_26_hours(defs: dg.Definitions) -> None:
    from datetime import timedelta

    graph = defs.resolve_asset_graph()
    for spec in discover_lanes():
        policy = graph.get(dg.AssetKey([spec.name, "metrics"])).freshness_policy
        assert policy == dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=26)), spec.name
        assert policy.fail_window.to_timedelta() == timedelta(hours=26)


def test_fluency_checks_snapshot(defs: dg.Definitions) -> None:
    graph = defs.resolve_asset_graph()
    checks = sorted(k.name for k in graph.asset_check_keys if k.asset_key.path[0] == "deterministic_fluency")
    assert checks == [
        "complete_punctuation_rate",
        "error_rate",
        "error_thresholds_hold",
        "expected_predicates_pass_rate",
        "finite_predicate_shape_rate",
        "measurement",
        "no_dotted_inventory_rate",
        "no_placeholder_rate",
        "no_provenance_only_rate",
        "no_regression",
    ]


def test_thresholds_are_checks_on_metrics_and_the_gate_and_regression_checks_on_history(
    defs: dg.Definitions,
) -> None:
    graph = defs.resolve_asset_graph()
    for spec in discover_lanes():
        checks = {
            k.name for k in graph.asset_check_keys if k.asset_key == dg.AssetKey([spec.name, "metrics"])
        }
        assert checks == {"measurement"} | {t.check_name for t in spec.effective_thresholds}, spec.name
        history = {
            k.name for k in graph.asset_check_keys if k.asset_key == dg.AssetKey([spec.name, "history"])
        }
        assert history == {"no_regression", "error_thresholds_hold"}, spec.name


def test_one_nightly_schedule_and_job_per_lane(defs: dg.Definitions) -> None:
    schedules = {s.name: s for s in defs.schedules or []}
    for spec in discover_lanes():
        schedule = schedules[f"{spec.name}_nightly"]
        assert schedule.cron_schedule == NIGHTLY_CRON
        assert schedule.job_name == f"{spec.name}_job"
        assert defs.resolve_job_def(f"{spec.name}_job") is not None
    assert set(schedules) == {f"{spec.name}_nightly" for spec in discover_lanes()} | {
        "history_compaction_monthly",
        "runtime_targets_observe",
    }


def test_nightly_schedule_requests_every_nightly_split_for_every_nightly_target(
    defs: dg.Definitions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime

    evals = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals", evals)
    (evals / "runtimes.yaml").write_text(
        "targets:\n  reference: {spec: reference, nightly: true}\n"
        "  bare: {spec: 'reference:no-gloss', nightly: true}\n  adhoc: {spec: 'reference:no-gloss'}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
    # Not instance_for_test: its folder is deleted on exit, but Dagster caches the instance its
    # definitions were first loaded with for the rest of the process.
    (tmp_path / "instance").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "instance")) as instance:
        for spec in discover_lanes():
            schedule = next(s for s in defs.schedules or [] if s.name == f"{spec.name}_nightly")
            # A schedule context must be closed: it holds the instance's state storage in a context
            # variable, which a later definitions load in this process would otherwise find stale.
            with dg.build_schedule_context(
                instance=instance,
                scheduled_execution_time=datetime(2026, 11, 30, 2, tzinfo=UTC),
                repository_def=defs.get_repository_def(),
            ) as context:
                requests = list(schedule.evaluate_tick(context).run_requests or [])
            assert [r.partition_key for r in requests] == [
                f"{split}|{target}" for split in spec.nightly_splits for target in ("reference", "bare")
            ]
            assert {r.tags["eval_pipeline/date"] for r in requests} == {"2026-11-30"}
            assert set(instance.get_dynamic_partitions(f"{spec.name}__case_sets")) == set(spec.nightly_splits)
        assert set(instance.get_dynamic_partitions("runtime_targets")) == {"reference", "bare"}


@pytest.mark.slow
def test_dagster_cli_validates_the_workspace(tmp_path: object) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "All code locations passed validation" in result.stderr + result.stdout


@pytest.mark.parametrize("spec", discover_lanes(), ids=lambda s: s.name)
def test_every_lane_emits_exactly_the_metrics_its_kind_declares(spec: object) -> None:
    from eval_pipeline.lanes import lane_kind
    from eval_pipeline.lanes.kind import emitted_metrics
    from eval_pipeline.lanes.spec import LaneSpec
    from eval_pipeline.run.pipeline import evaluate_lane
    from eval_pipeline.runtimes import build_runtime

    assert isinstance(spec, LaneSpec)
    run = evaluate_lane(spec, spec.nightly_splits[0], build_runtime("reference"))
    assert {m.metric for m in run.metric_values} == emitted_metrics(lane_kind(spec))


def test_the_observe_schedule_observes_every_declared_target_in_one_run(
    defs: dg.Definitions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime

    evals = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals", evals)
    (evals / "runtimes.yaml").write_text(
        "targets:\n  reference: {spec: reference}\n  bare: {spec: 'reference:no-gloss'}\n", encoding="utf-8"
    )
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
    schedule = next(s for s in defs.schedules or [] if s.name == "runtime_targets_observe")
    with dg.instance_for_test() as instance:
        with dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=datetime(2026, 11, 30, 1, 55, tzinfo=UTC),
            repository_def=defs.get_repository_def(),
        ) as context:
            requests = list(schedule.evaluate_tick(context).run_requests or [])
        assert [(r.run_key, r.partition_key) for r in requests] == [("2026-11-30T01:55", None)]
        assert set(instance.get_dynamic_partitions("runtime_targets")) == {"reference", "bare"}
        observed = defs.resolve_job_def("runtime_targets_observe_job").execute_in_process(instance=instance)
        assert observed.success
        versions = {
            key: instance.get_latest_data_version_record(dg.AssetKey("runtime_targets"), True, key)
            for key in ("reference", "bare")
        }
        tags = {
            key: record.event_log_entry.tags["dagster/data_version"]
            for key, record in versions.items()
            if record
        }
        assert set(tags) == {"reference", "bare"} and tags["reference"] != tags["bare"]


def test_every_table_asset_describes_every_column(defs: dg.Definitions) -> None:
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        schema = graph.get(key).metadata.get("dagster/column_schema")
        if key.path[-1] == "history" or key == dg.AssetKey("runtime_targets"):
            continue  # history appends the other assets' tables; runtime_targets is observed, not a table
        assert schema is not None, key.to_user_string()
        described = {column.name: column.description for column in schema.columns}
        assert described and all(text and len(text) > 10 for text in described.values()), key.to_user_string()
