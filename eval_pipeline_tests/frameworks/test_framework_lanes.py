"""Framework lanes: an upstream framework's runners (the small checkout next to this file: a
chat-like lane with per-turn lists, one with nested and enum fields, one that raises, one that
hangs) imported with ``import-lanes`` and run through Dagster with the checkout's interpreter."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_CHECK_FAILED, EXIT_VOID
from eval_pipeline.history import table_glob
from eval_pipeline.lanes.kinds.framework_runner import detail_rows, flattened
from eval_pipeline.lanes.runner_spec import RunnerSpec
from eval_pipeline_tests.frameworks.conftest import CHECKOUT


def import_lanes(*extra: str) -> str:
    result = CliRunner().invoke(
        app,
        [
            "import-lanes",
            os.environ["FIXTURE_CHECKOUT"],
            "--name",
            "fix",
            "--checkout-ref",
            "${FIXTURE_CHECKOUT}",
            "--python",
            sys.executable,
            "--state-env",
            "FIXTURE_STATE_DIR",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.output


def lane_yaml(project: Path, lane: str) -> dict:
    return yaml.safe_load((project / "evals" / lane / "lane.yaml").read_text(encoding="utf-8"))


def write_lane_yaml(project: Path, lane: str, document: dict) -> None:
    (project / "evals" / lane / "lane.yaml").write_text(
        yaml.safe_dump(document, sort_keys=False), encoding="utf-8"
    )


def history_transcripts(root: Path) -> pd.DataFrame:
    glob = table_glob(str(root), "transcripts")
    return duckdb.sql(f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true)").df()


def run(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(app, ["run", *args, "--json"])
    try:
        return result.exit_code, json.loads(result.stdout)
    except ValueError:
        raise AssertionError(result.output) from None


def test_import_lanes_writes_every_compliant_lane_and_says_why_the_others_are_skipped(project: Path) -> None:
    said = import_lanes()
    assert sorted(p.name for p in (project / "evals").iterdir()) == ["fix_greeting_chat", "fix_verdicts"]
    assert "helper_only: runner.py has no run_lane" in said
    assert "no_contract: no contract.md" in said
    assert "crashing: no metric found" in said
    chat = lane_yaml(project, "fix_greeting_chat")
    assert chat["kind"] == "framework_runner" and chat["thresholds"] == []
    assert chat["splits"] == {"dev": ["dev/cases.jsonl"], "public_v1": ["public_v1/cases.jsonl"]}
    assert chat["runner"]["checkout"] == "${FIXTURE_CHECKOUT}" and chat["runner"]["id_field"] == "id"
    # the metrics its runner builds, read from its source, each passed through
    assert chat["runner"]["metrics"] == {
        "greet_rate": {"value": "greet_rate"},
        "overall_pass": {"value": "overall_pass"},
        "histogram": {"value": "histogram"},
        "lengths": {"value": "lengths"},
    }
    contract = (project / "evals" / "fix_greeting_chat" / "contract.md").read_text(encoding="utf-8")
    assert "evals/greeting_chat/contract.md" in contract and "> A chat-like lane" in contract
    # cases without ids get one; the runner is told to drop it
    verdicts = lane_yaml(project, "fix_verdicts")["runner"]
    assert verdicts["added_id"] is True
    first = json.loads((project / "evals/fix_verdicts/dev/cases.jsonl").read_text().splitlines()[0])
    assert first == {"id": "dev-0001", "a": 1, "b": 2, "expect": 3}
    assert CliRunner().invoke(app, ["validate"]).exit_code == 0


def test_a_rerun_shows_what_changed_upstream_and_keeps_the_stated_thresholds(project: Path) -> None:
    import_lanes()
    chat = lane_yaml(project, "fix_greeting_chat")
    chat["thresholds"] = [
        {"metric": "greet_rate", "op": ">=", "value": 0.5, "severity": "ERROR", "reason": "c"}
    ]
    write_lane_yaml(project, "fix_greeting_chat", chat)
    assert "fix_greeting_chat (greeting_chat): unchanged" in import_lanes()
    upstream = Path(os.environ["FIXTURE_CHECKOUT"]) / "evals/greeting_chat/dev/cases.jsonl"
    upstream.write_text(upstream.read_text() + '{"id": "g5", "kind": "warm", "prompts": ["Zed"]}\n')
    said = import_lanes("--dry-run")
    assert "fix_greeting_chat (greeting_chat): changed" in said and "~ dev/cases.jsonl" in said
    assert "g5" not in (project / "evals/fix_greeting_chat/dev/cases.jsonl").read_text()  # dry run
    import_lanes()
    assert "g5" in (project / "evals/fix_greeting_chat/dev/cases.jsonl").read_text()
    assert lane_yaml(project, "fix_greeting_chat")["thresholds"] == chat["thresholds"]


def test_a_detail_becomes_rows_nested_fields_dotted_none_not_applicable_enums_by_pass_when() -> None:
    runner = RunnerSpec.model_validate(
        {
            "checkout": ".",
            "lane": "x",
            "case_rows": {"hard": ["checks.parsed"], "report": ["listed_missing"]},
            "pass_when": {"outcome": ["correct"]},
            "metrics": {"m": {"rate_of": "checks.parsed"}},
        }
    )
    detail = {
        "outcome": "wrong",
        "checks": {"parsed": True, "in_range": None, "deep": {"ok": False}},
        "reason": "r",
    }
    assert flattened(detail)["checks.deep.ok"] is False
    assert detail_rows(runner, detail) == [
        ("checks.parsed", True, "ok"),
        ("listed_missing", None, "not_applicable"),
        ("checks.deep.ok", False, "failed"),
        ("outcome", False, "outcome_wrong"),
    ]


@pytest.mark.slow
def test_a_chat_like_lane_runs_through_dagster_with_rows_turns_rates_and_values(
    project: Path, history_root: Path
) -> None:
    import_lanes()
    chat = lane_yaml(project, "fix_greeting_chat")
    chat["runner"].update(
        case_rows={"hard": ["greeted"], "report": ["polite"]},
        turns={"field": "turns"},
        ignore=[],
        metrics={
            "greet_rate": {"rate_of": "greeted"},
            "warm_greet_rate": {"rate_of": "greeted", "where": {"kind": ["warm"]}},
            "polite_rate": {"rate_of": "polite"},
            "core_greet_rate": {"value": "greet_rate"},
            "core_overall_pass": {"value": "overall_pass"},
        },
    )
    chat["thresholds"] = [
        {"metric": "greet_rate", "op": ">=", "value": 0.9, "severity": "ERROR", "reason": "c"}
    ]
    write_lane_yaml(project, "fix_greeting_chat", chat)
    code, document = run("--lane", "fix_greeting_chat", "--split", "dev")
    assert code == EXIT_CHECK_FAILED
    (lane,) = document["lanes"]
    assert lane["runtime"].startswith("fix-") and not lane["void"]
    metrics = lane["metrics"]
    assert metrics["greet_rate"] == 0.75  # g2's second reply does not greet
    assert metrics["warm_greet_rate"] == pytest.approx(2 / 3)  # g1, g2, g4
    assert metrics["polite_rate"] == pytest.approx(2 / 3)  # g3 (terse): not applicable
    assert metrics["core_greet_rate"] == 0.75 and metrics["core_overall_pass"] == 0.0
    rows = pd.DataFrame(lane["case_predicates"])
    failed = rows[rows["passed"] == False]  # noqa: E712
    assert set(failed["case_id"]) == {"g2"}
    assert "a reply did not greet" in failed[failed["predicate"] == "greeted"]["message"].iloc[0]
    assert rows[(rows["case_id"] == "g3") & (rows["predicate"] == "polite")]["passed"].isna().all()
    transcripts = history_transcripts(history_root)
    g1 = transcripts[transcripts["case_id"] == "g1"].sort_values("turn_index")
    assert list(g1["role"]) == ["case", "turn", "turn"]
    assert list(g1["surface"])[1:] == ["hello, Ada", "hello, Bob"]
    # each run gets a fresh engine-state folder: nothing is left from the run before
    code, again = run("--lane", "fix_greeting_chat", "--split", "dev")
    details = history_transcripts(history_root)
    left = [json.loads(raw)["state_left"] for raw in details[details["role"] == "case"]["raw"]]
    assert left and all(found == [] for found in left)
    checks = {c["name"]: c for c in again["lanes"][0]["checks"]}
    assert checks["no_regression"]["verdict"] == "pass"  # the series' previous run: compared


@pytest.mark.slow
def test_nested_and_enum_fields_are_rows_and_pass_when_gives_a_rate(project: Path) -> None:
    import_lanes()
    verdicts = lane_yaml(project, "fix_verdicts")
    verdicts["runner"]["pass_when"] = {"outcome": ["correct"]}
    verdicts["runner"]["metrics"] = {
        "correct_rate": {"rate_of": "outcome"},
        "accuracy": {"value": "accuracy"},
    }
    write_lane_yaml(project, "fix_verdicts", verdicts)
    _, document = run("--lane", "fix_verdicts", "--split", "dev")
    (lane,) = document["lanes"]
    # 1+2 and 60+50 are correct; 2+2 is wrong, the skipped case abstained: not correct either
    assert lane["metrics"]["correct_rate"] == 0.5 == lane["metrics"]["accuracy"]
    rows = pd.DataFrame(lane["case_predicates"])
    assert {"checks.parsed", "checks.in_range", "outcome"} <= set(rows["predicate"])
    skipped = rows[(rows["case_id"] == "dev-0004") & (rows["predicate"] == "checks.in_range")]
    assert skipped["passed"].isna().all()


def write_failing_lane(project: Path, lane: str, deadline: float) -> None:
    folder = project / "evals" / f"fix_{lane}"
    shutil.copytree(CHECKOUT / "evals" / lane / "dev", folder / "dev")
    (folder / "contract.md").write_text("# x\n", encoding="utf-8")
    document = {
        "name": f"fix_{lane}",
        "kind": "framework_runner",
        "version": "1",
        "title": lane,
        "splits": {"dev": ["dev/cases.jsonl"]},
        "nightly_splits": ["dev"],
        "runner": {
            "checkout": "${FIXTURE_CHECKOUT}",
            "lane": lane,
            "name": "fix",
            "python": sys.executable,
            "deadline_s": deadline,
            "metrics": {"pass_rate": {"rate_of": "passed"}},
        },
    }
    write_lane_yaml(project, f"fix_{lane}", document)


@pytest.mark.slow
def test_a_runner_that_raises_gives_a_void_run_with_its_tracebacks_last_lines(project: Path) -> None:
    write_failing_lane(project, "crashing", 60)
    code, document = run("--lane", "fix_crashing")
    assert code == EXIT_VOID
    (lane,) = document["lanes"]
    assert lane["void"] and lane["metrics"]["pass_rate"] is None
    (fault,) = lane["faults"]
    assert fault["turns"] == 2
    assert "RuntimeError: the engine lost its pack after 2 cases" in fault["fault"]
    assert "_explode" in fault["fault"]  # the traceback's last lines, not just the message


@pytest.mark.slow
def test_a_runner_that_hangs_is_stopped_at_its_deadline(project: Path) -> None:
    write_failing_lane(project, "hanging", 2)
    code, document = run("--lane", "fix_hanging")
    assert code == EXIT_VOID
    (fault,) = document["lanes"][0]["faults"]
    assert "did not finish within its deadline of 2 s" in fault["fault"]
