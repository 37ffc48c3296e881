"""Messages: what they name, Block Kit's limits whatever a run holds, text that stays text."""

from __future__ import annotations

import json
from typing import Any

from eval_pipeline.core.series import Series
from eval_pipeline.notify import (
    FailingCase,
    LaneRun,
    Links,
    json_payload,
    lane_run_events,
    slack_payload,
)
from eval_pipeline.notify.dispatch import links_for
from eval_pipeline.notify.render import SLACK_BLOCK_LIMIT, SLACK_HEADER_LIMIT, SLACK_TEXT_LIMIT
from eval_pipeline.outcome.run_outcome import CheckOutcome

FAILED = CheckOutcome("fabrication_rate", False, "ERROR", 0.5, "== 0", "fail")
WARNED = CheckOutcome("no_dotted_inventory_rate", False, "WARN", 0.25, ">= 0.85", "warn")
PASSED = CheckOutcome("refusal_rate", True, "ERROR", 1.0, ">= 0.95", "pass")
MEASURED = CheckOutcome("measurement", True, "ERROR", None, None, "pass", "2 of 40 turns faulted")


def lane_run(
    checks: tuple[CheckOutcome, ...],
    *,
    cases: int = 0,
    reason: str = "a confident definition",
    void: bool = False,
) -> LaneRun:
    failing = tuple(FailingCase(f"case_{i:05d}", "no_fabrication", f"{reason} #{i}") for i in range(cases))
    return LaneRun(
        series=Series("refusal_calibration", "public", "staging", "public"),
        run_id="9f" * 16,
        night="2026-12-01",
        checks=checks,
        failing_cases=failing[:5],
        failing_total=cases,
        void=void,  # the run's outcome says it (notify derives nothing)
    )


def texts(payload: dict[str, Any]) -> list[str]:
    """Every text field of a Block Kit payload."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "text" and isinstance(item, str):
                    found.append(item)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(payload)
    return found


def test_events_of_a_run_follow_its_checks_and_the_previous_run() -> None:
    regression = CheckOutcome(
        "no_regression",
        False,
        "WARN",
        None,
        None,
        "warn",
        description="1 metric(s) regressed",
        metadata={"regressed_metrics": ["refusal_rate"]},
    )
    assert [
        e.kind
        for e in lane_run_events(lane_run((MEASURED, FAILED, WARNED, regression)), previous_failed=True)
    ] == [
        "check_failed",
        "regression",
    ]
    (failed,) = lane_run_events(lane_run((MEASURED, WARNED)), previous_failed=None)
    assert (failed.kind, failed.severity, [c.name for c in failed.checks]) == (
        "check_failed",
        "WARN",
        ["no_dotted_inventory_rate"],
    )
    assert [
        (e.kind, e.severity) for e in lane_run_events(lane_run((MEASURED, PASSED)), previous_failed=True)
    ] == [("recovered", "ERROR")]
    assert lane_run_events(lane_run((MEASURED, PASSED)), previous_failed=False) == []
    assert lane_run_events(lane_run((MEASURED, WARNED)), previous_failed=True)[-1].kind == "recovered"
    void_run = lane_run(
        (
            CheckOutcome("measurement", False, "ERROR", None, None, "void", "40 of 40 turns faulted"),
            CheckOutcome("refusal_rate", False, "ERROR", None, ">= 0.95", "void"),
        ),
        void=True,
    )
    assert [e.kind for e in lane_run_events(void_run, previous_failed=False)] == ["void"]


def test_a_message_names_lane_series_metric_value_threshold_cases_and_links() -> None:
    (event,) = lane_run_events(lane_run((MEASURED, FAILED, PASSED), cases=7), previous_failed=None)
    links = links_for(
        event.run.run_id,
        {
            "EVAL_PIPELINE_DAGSTER_URL": "http://dagster.test/",
            "EVAL_PIPELINE_VIEWER_URL": "http://viewer.test",
        },
    )
    slack = "\n".join(texts(slack_payload(event, links)))
    for expected in (
        "refusal_calibration/public/staging/public",
        "fabrication_rate = 0.5, needs == 0 (ERROR)",
        "case_00000 · no_fabrication: a confident definition #0",
        "case_00004",
        "…and 2 more: eval-pipeline show 9f9f9f9f",
        f"<http://dagster.test/runs/{event.run.run_id}|Dagster run>",
        f"<http://viewer.test/runs/{event.run.run_id}|viewer>",
    ):
        assert expected in slack
    assert "case_00005" not in slack and "refusal_rate" not in slack  # five cases; only the failed check
    document = json.loads(json.dumps(json_payload(event, links)))
    assert (
        document["event"] == "check_failed"
        and document["series"] == "refusal_calibration/public/staging/public"
    )
    assert [c["name"] for c in document["checks"]] == ["fabrication_rate"]
    assert document["checks"][0]["value"] == 0.5 and document["checks"][0]["threshold"] == "== 0"
    assert len(document["failing_cases"]) == 5 and document["failing_total"] == 7
    assert document["links"] == {
        "dagster_run": f"http://dagster.test/runs/{event.run.run_id}",
        "viewer_run": f"http://viewer.test/runs/{event.run.run_id}",
    }
    assert json_payload(event, Links())["links"] == {"dagster_run": None, "viewer_run": None}


def test_slack_payload_keeps_block_kit_limits_for_10000_failing_cases_with_long_reasons() -> None:
    run = lane_run((MEASURED, FAILED), cases=10_000, reason="x" * 5_000)
    (event,) = lane_run_events(run, previous_failed=None)
    payload = slack_payload(event, Links())
    assert len(payload["blocks"]) <= SLACK_BLOCK_LIMIT
    assert all(len(text) <= SLACK_TEXT_LIMIT for text in texts(payload))
    headers = [b["text"]["text"] for b in payload["blocks"] if b["type"] == "header"]
    assert all(len(h) <= SLACK_HEADER_LIMIT for h in headers)
    assert "…and 9995 more" in "\n".join(texts(payload))


def test_slack_text_is_escaped_so_user_strings_cannot_link_or_mention() -> None:
    run = lane_run((MEASURED, FAILED), cases=1, reason="<!channel> & <http://evil|click>")
    (event,) = lane_run_events(run, previous_failed=None)
    shown = "\n".join(texts(slack_payload(event, Links())))
    assert "&lt;!channel&gt; &amp; &lt;http://evil|click&gt;" in shown
    assert "<!channel>" not in shown
