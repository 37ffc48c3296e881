"""A check whose metric measured nothing says why: the not-applicable codes that emptied its
denominator and on how many rows, in the printed run, ``--json``, JUnit and the check metadata."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_OK
from eval_pipeline.lanes.spec import ThresholdSpec
from eval_pipeline.metrics.samples import pool
from eval_pipeline.metrics.scoring import MetricValue, PredicateRates, judge
from eval_pipeline.run.pipeline import SampleMetrics, merge_batches
from eval_pipeline_tests.runtimes.helpers import served_reference

TELEMETRY = ThresholdSpec(metric="telemetry_rate", op="==", value=1.0, severity="ERROR", reason="r")


def turn_rows(codes: list[str | None], passed: list[bool | None]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "case_id": [f"case{i}" for i in range(len(codes))],
            "predicate": ["telemetry_match"] * len(codes),
            "passed": pd.array(passed, dtype="boolean"),
            "code": codes,
        }
    )


def telemetry_rate(table: pd.DataFrame) -> list[MetricValue]:
    return [PredicateRates(table, rows_are="turns").rate("telemetry_rate", "telemetry_match")]


def test_the_void_reason_names_the_codes_that_emptied_the_denominator() -> None:
    (verdict,) = judge([TELEMETRY], telemetry_rate(turn_rows(["no_telemetry"] * 3, [None] * 3)))
    assert verdict.void and not verdict.passed
    assert verdict.void_reason == "no turn carried telemetry (no_telemetry on 3 of 3 turns)"
    mixed = turn_rows(["first_ask", "first_ask", "first_ask_not_grounded"], [None] * 3)
    (verdict,) = judge([TELEMETRY], telemetry_rate(mixed))
    assert (
        verdict.void_reason == "no turn qualified (of 3 turns: first_ask on 2, first_ask_not_grounded on 1)"
    )
    # A metric derived from others (all_of) without counts: it names where to look.
    derived = ThresholdSpec(metric="both", op="==", value=1.0, severity="ERROR", reason="r")
    (verdict,) = judge([derived], [MetricValue("both", None)])
    assert verdict.void_reason == "a metric it is derived from measured nothing (see that metric's check)"
    # A metric with one applicable row is measured: no reason, a verdict.
    (verdict,) = judge([TELEMETRY], telemetry_rate(turn_rows(["no_telemetry", "pass"], [None, True])))
    assert not verdict.void and verdict.passed and verdict.void_reason == ""


def test_the_codes_add_up_over_case_batches_and_samples() -> None:
    first = telemetry_rate(turn_rows(["no_telemetry"] * 2, [None] * 2))
    second = telemetry_rate(turn_rows(["no_telemetry"] * 3, [None] * 3))
    batches = merge_batches([SampleMetrics([first], None), SampleMetrics([second], None)])
    (merged,) = batches.per_sample[0]
    assert merged.not_applicable == (("no_telemetry", 5),) and merged.rows_are == "turns"
    # A batch with an applicable row makes the metric measured: no codes, as in one piece.
    measured = telemetry_rate(turn_rows(["pass"], [True]))
    (whole,) = merge_batches([SampleMetrics([first], None), SampleMetrics([measured], None)]).per_sample[0]
    assert whole.value == 1.0 and whole.not_applicable == ()
    (pooled,) = pool([[merged], [merged]], [merged])
    (verdict,) = judge([TELEMETRY], [pooled])
    assert verdict.void_reason == "no turn carried telemetry (no_telemetry on 10 of 10 turns)"


def test_a_runtime_without_telemetry_says_why_in_json_junit_and_check_metadata(tmp_path: Path) -> None:
    junit = tmp_path / "eval.xml"
    with served_reference() as server:  # an OpenAI-compatible server sends no turn-log telemetry
        result = CliRunner().invoke(
            app,
            [
                *("run", "--lane", "warmed_session_consistency", "--split", "dev", "--json"),
                *("--runtime", f"openai:{server.base_url}", "-o", "model=reference"),
                *("--junit", str(junit)),
            ],
        )
    assert result.exit_code == EXIT_OK, result.output
    (lane,) = json.loads(result.stdout)["lanes"]
    turns = sum(row["predicate"] == "telemetry_match" for row in lane["turn_predicates"])
    expected = f"no turn carried telemetry (no_telemetry on {turns} of {turns} turns)"
    checks = {check["name"]: check for check in lane["checks"]}
    assert checks["telemetry_consistency_rate"]["verdict"] == "void"
    assert checks["telemetry_consistency_rate"]["void_reason"] == expected  # from the check's metadata
    assert checks["no_placeholder_rate"]["void_reason"] is None  # measured: nothing to explain
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["check.telemetry_consistency_rate"] == "void"
    assert properties["check.telemetry_consistency_rate.void_reason"] == expected
    assert "check.no_placeholder_rate.void_reason" not in properties
