"""Every discovered lane, through every adapter, gives the tables the in-process reference gives."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.runtimes.bots import CoreStyleRuntime
from eval_pipeline_tests.runtimes.helpers import assert_same_tables, lanes, served_reference, split_of

EXEC_BOT = Path(__file__).with_name("exec_bot.py")
LANES = lanes()
LANE_IDS = [spec.name for spec in LANES]


def _evaluate(
    spec: LaneSpec, runtime_spec: str, options: dict[str, Any], concurrency: int | None = 4
) -> LaneRun:
    runtime = build_runtime(runtime_spec, options)
    try:
        return evaluate_lane(spec, split_of(spec), runtime, concurrency=concurrency)
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def reference_runs() -> dict[str, LaneRun]:
    return {spec.name: evaluate_lane(spec, split_of(spec), build_runtime("reference")) for spec in LANES}


def test_lanes_are_discovered() -> None:
    assert "deterministic_fluency" in LANE_IDS


@pytest.mark.parametrize("spec", LANES, ids=LANE_IDS)
def test_python_core_style_class_in_process(spec: LaneSpec, reference_runs: dict[str, LaneRun]) -> None:
    run = _evaluate(
        spec, "python:eval_pipeline_tests.runtimes.bots:CoreStyleRuntime", {"fields": CoreStyleRuntime.FIELDS}
    )
    assert_same_tables(run, reference_runs[spec.name])
    # What the dataclass said besides the mapped fields travels in raw.
    assert all(json.loads(raw)["turn"] >= 1 for raw in run.transcripts["raw"])


@pytest.mark.parametrize("spec", LANES, ids=LANE_IDS)
def test_python_function_bot_in_process(spec: LaneSpec, reference_runs: dict[str, LaneRun]) -> None:
    run = _evaluate(spec, "python:eval_pipeline_tests.runtimes.bots:make_function_bot", {})
    assert_same_tables(run, reference_runs[spec.name])


@pytest.mark.slow
@pytest.mark.parametrize("spec", LANES, ids=LANE_IDS)
def test_python_worker_processes(spec: LaneSpec, reference_runs: dict[str, LaneRun]) -> None:
    run = _evaluate(
        spec,
        "python:eval_pipeline_tests.runtimes.bots:CoreStyleRuntime",
        {"fields": CoreStyleRuntime.FIELDS, "workers": 2},
        concurrency=None,
    )
    assert_same_tables(run, reference_runs[spec.name])


@pytest.mark.slow
@pytest.mark.parametrize("spec", LANES, ids=LANE_IDS)
def test_exec_child_processes(spec: LaneSpec, reference_runs: dict[str, LaneRun]) -> None:
    run = _evaluate(spec, f"exec:{sys.executable} {EXEC_BOT}", {"workers": 2})
    assert_same_tables(run, reference_runs[spec.name])


@pytest.mark.slow
@pytest.mark.parametrize("spec", LANES, ids=LANE_IDS)
def test_openai_against_served_reference(spec: LaneSpec, reference_runs: dict[str, LaneRun]) -> None:
    fields = {
        name: f"choices.0.message.{name}" for name in ("grounding_source", "surface_tag", "epistemic_status")
    }
    with served_reference() as server:
        run = _evaluate(spec, f"openai:{server.base_url}", {"model": "reference", "response_fields": fields})
    assert_same_tables(run, reference_runs[spec.name], telemetry=False)
    usage = [json.loads(raw)["usage"] for raw in run.transcripts["raw"]]
    assert all(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] > 0 for u in usage)


@pytest.mark.slow
@pytest.mark.parametrize("spec", LANES, ids=LANE_IDS)
def test_openai_streamed_from_served_reference(spec: LaneSpec, reference_runs: dict[str, LaneRun]) -> None:
    fields = {
        name: f"choices.0.message.{name}" for name in ("grounding_source", "surface_tag", "epistemic_status")
    }
    params = {"stream": True, "stream_options": {"include_usage": True}}
    with served_reference() as server:
        run = _evaluate(
            spec,
            f"openai:{server.base_url}",
            {"model": "reference", "response_fields": fields, "request_params": params},
        )
    assert_same_tables(run, reference_runs[spec.name], telemetry=False)
    raws = [json.loads(raw) for raw in run.transcripts["raw"]]
    assert all(raw["ttft_ms"] > 0 and raw["chunks"] >= 3 and raw["usage"]["total_tokens"] > 0 for raw in raws)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize("spec", LANES, ids=LANE_IDS)
def test_replay_of_recorded_transcripts(
    spec: LaneSpec, suffix: str, reference_runs: dict[str, LaneRun], tmp_path: Path
) -> None:
    recorded = reference_runs[spec.name].transcripts.drop(columns=["latency_ms", "attempts", "raw"])
    path = tmp_path / f"recorded{suffix}"
    if suffix == ".parquet":
        recorded.to_parquet(path)
    else:
        rows = recorded.astype(object).where(recorded.notna(), None).to_dict("records")
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    run = _evaluate(spec, f"replay:{path}", {})
    assert_same_tables(run, reference_runs[spec.name], telemetry=False)


def test_openai_reads_the_served_fields_without_a_response_field(reference_runs: dict[str, LaneRun]) -> None:
    spec = next(s for s in LANES if s.name == "deterministic_fluency")
    with served_reference() as server:  # a plain run: the fields are read beside content
        run = _evaluate(spec, f"openai:{server.base_url}", {"model": "reference"})
    assert_same_tables(run, reference_runs[spec.name], telemetry=False)
