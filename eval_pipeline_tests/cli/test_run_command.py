"""`eval-pipeline run`: exit codes, the JSON document, bad input with file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK
from eval_pipeline.runtimes.targets import load_targets
from eval_pipeline_tests.paths import PROJECT_ROOT

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_json_document_has_metrics_checks_and_rows() -> None:
    code, out, err = invoke("run", "--lane", "deterministic_fluency", "--split", "dev", "--json")
    assert code == EXIT_OK, out
    assert (
        "2/2" in err and "errors 0" in err
    )  # the progress bar goes to stderr: stdout stays one JSON document
    document = json.loads(out)
    (lane,) = document["lanes"]
    assert document["run_id"] and lane["run_id"] != document["run_id"]
    assert (lane["lane"], lane["split"], lane["runtime"]) == ("deterministic_fluency", "dev", "reference")
    assert lane["metrics"]["cases"] == 2.0
    assert {c["name"] for c in lane["checks"]} >= {"no_placeholder_rate", "error_rate"}
    check = next(c for c in lane["checks"] if c["name"] == "no_placeholder_rate")
    assert check == {
        "name": "no_placeholder_rate",
        "passed": True,
        "verdict": "pass",
        "severity": "ERROR",
        "value": 1.0,
        "threshold": "== 1",
        "n": 2.0,  # applicable cases
        "void_reason": None,  # measured
        "reason": None,
        "description": "Pinned hard floor (contract, scoring rubric).",
        "failing_case_ids": [],
    }
    assert lane["verdict"] == "pass" and lane["failing"] == [] and lane["failing_results"] == 0
    regression = next(c for c in lane["checks"] if c["name"] == "no_regression")
    assert (regression["verdict"], regression["reason"]) == ("n/a", "first run of this series")
    assert {r["case_id"] for r in lane["case_predicates"]} == {
        "fluency_dev_time_001",
        "fluency_dev_oov_zorblat_002",
    }
    row = lane["turn_predicates"][0]
    assert set(row) >= {
        "run_id",
        "lane",
        "split",
        "runtime",
        "case_id",
        "turn_index",
        "predicate",
        "passed",
        "code",
        "evidence",
    }


@pytest.mark.slow
def test_a_failing_blocking_check_exits_1(tmp_path: Path) -> None:
    recorded = tmp_path / "turns.jsonl"
    recorded.write_text(
        "\n".join(
            json.dumps({"case_id": c, "surface": "..."})
            for c in ("fluency_dev_time_001", "fluency_dev_oov_zorblat_002")
        )
        + "\n",
        encoding="utf-8",
    )
    code, out, _ = invoke(
        "run", "--lane", "deterministic_fluency", "--split", "dev", "--runtime", f"replay:{recorded}"
    )
    assert code == EXIT_CHECK_FAILED
    assert "fail" in out and "blocking check failure" in out


def test_a_bad_case_file_exits_2_naming_file_line_and_field(tmp_path: Path) -> None:
    cases = tmp_path / "bad.jsonl"
    cases.write_text(
        '{"id": "x", "prompt": "Hi?", "category": "c", "expected_predicates": ["nope"]}\n', encoding="utf-8"
    )
    code, _, err = invoke("run", "--lane", "deterministic_fluency", "--cases", str(cases))
    assert code == EXIT_BAD_INPUT
    assert f"{cases}:1: expected_predicates[0]:" in err
    assert "nothing was run" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lane", "no_such_lane"], "unknown lane"),
        (["--lane", "deterministic_fluency", "--split", "holdout"], "has no split 'holdout'"),
        (["--runtime", "nosuch:thing"], "unknown runtime"),
        (["--runtime", "replay:/nonexistent/turns.jsonl"], "does not exist"),
        (["--runtime-option", "novalue"], "expected KEY=VALUE"),
        (["--date", "30-11-2026"], "expected YYYY-MM-DD"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(args: list[str], message: str) -> None:
    code, _, err = invoke("run", *args)
    assert code == EXIT_BAD_INPUT
    assert message in err


def test_metric_values_print_counts_whole_and_rates_to_four_figures() -> None:
    from eval_pipeline.metrics.scoring import number_text

    assert [number_text(v) for v in (1_000_000.0, 950_000.0, 0.95, 1.0, 1 / 3)] == [
        "1000000",
        "950000",
        "0.95",
        "1",
        "0.3333",
    ]


@pytest.mark.slow
def test_a_run_of_several_lanes_observes_its_target_once_before_the_first() -> None:
    import dagster as dg

    from eval_pipeline.dagster_wiring.launch import ensure_instance
    from eval_pipeline.dagster_wiring.runtime_targets import RUNTIME_TARGETS_KEY

    code, out, _ = invoke(
        "run", "--split", "dev", "--lane", "deterministic_fluency", "--lane", "articulation_of_status"
    )
    assert code == EXIT_OK, out
    instance = ensure_instance()
    runs = instance.get_runs()  # newest first: the lane runs and nothing else (no observation run)
    assert [run.job_name for run in reversed(runs)] == [
        "deterministic_fluency_job",
        "articulation_of_status_job",
    ]
    observations = instance.fetch_observations(RUNTIME_TARGETS_KEY, limit=10).records
    assert [o.partition_key for o in observations] == ["reference"]  # once, for both lanes
    first_run = instance.get_run_record_by_id(runs[-1].run_id)
    assert first_run is not None and first_run.create_timestamp.timestamp() >= observations[0].timestamp
    assert isinstance(observations[0].asset_observation, dg.AssetObservation)


@pytest.mark.parametrize(("name", "close"), [("reference-nogloss", "reference-no-gloss"), ("staging", None)])
def test_an_unknown_runtime_name_lists_the_declared_targets_and_the_closest(
    name: str, close: str | None
) -> None:
    result = CliRunner().invoke(app, ["run", "--runtime", name])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert f"unknown runtime {name!r}" in message
    declared = ", ".join(load_targets(PROJECT_ROOT / "evals" / "runtimes.yaml"))
    assert f"declared in evals/runtimes.yaml ({declared})" in message and "reference-no-gloss" in declared
    assert ("did you mean" in message) == (close is not None)
    if close:
        assert f"did you mean {close!r}?" in message
