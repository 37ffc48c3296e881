"""Against a runtime that supplies no telemetry (a plain ``openai:`` server on 127.0.0.1 that
answers with text only), a predicate reading only fields it never supplied says nothing of it:
its rows read n/a (not pass, not fail), metrics over it are missing (never 1.0 or 0.0), their
thresholds read n/a (not void: the run still measured the runtime), and the run names those
predicates once, in ``--json``, in its one CLI line and in the outcome stored with the run.
A predicate that reads one field the runtime did supply is judged as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval_pipeline.history.runs import find_runs
from eval_pipeline.history.views import connect
from eval_pipeline.outcome.run_outcome import committed_outcome
from eval_pipeline_tests.cli.test_what_failed import cli
from eval_pipeline_tests.runtimes.scripted_server import completion, json_reply, scripted

TEXT = "Truth is the property of a statement that fits the facts."
PLAIN = json_reply(completion({"content": TEXT}))
# A server that says where an answer came from, but not how it tags it.
SOURCED = json_reply(completion({"content": TEXT, "grounding_source": "none"}))
NA = "telemetry_not_supplied"


def _run(url: str, lane: str) -> dict[str, Any]:
    result = cli(
        "run", "--lane", lane, "--split", "dev", "--json",
        "--runtime", f"openai:{url}", "-o", "model=m", "-o", "max_retries=0",
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stdout + result.stderr
    (run,) = json.loads(result.stdout)["lanes"]
    return dict(run)


def _rows(run: dict[str, Any], table: str, predicate: str) -> list[dict[str, Any]]:
    rows = [row for row in run[table] if row["predicate"] == predicate]
    assert rows, f"no {table} rows of {predicate}"
    return rows


def test_predicates_reading_only_unsupplied_telemetry_read_na_and_their_metrics_are_missing(
    history_root: Path,
) -> None:
    with scripted(PLAIN) as server:
        run = _run(server.base_url, "conversational_thread_coherence")
    for table, predicate in (
        ("turn_predicates", "is_grounded"),
        ("case_predicates", "no_topic_drift_to_none"),
    ):
        for row in _rows(run, table, predicate):
            assert (row["passed"], row["code"]) == (None, NA), row
    # the surface predicates of the same turns are judged
    assert {row["passed"] for row in _rows(run, "turn_predicates", "no_placeholder")} == {True}
    # the metrics over them are missing, their checks n/a with the reason, the run is measured
    assert run["metrics"]["per_turn_grounded_rate"] is None
    assert run["metrics"]["case_no_drift_rate"] is None
    checks = {check["name"]: check for check in run["checks"]}
    for name in ("per_turn_grounded_rate", "case_no_drift_rate"):
        assert checks[name]["verdict"] == "n/a", checks[name]
        assert checks[name]["void_reason"] is None
        assert checks[name]["reason"].startswith("the runtime supplied none of the telemetry it reads"), (
            checks[name]
        )
    assert run["verdict"] != "void" and not run["void"]
    assert run["telemetry_not_supplied"] == {
        "is_grounded": ["grounding_source"],
        "no_topic_drift_to_none": ["grounding_source"],
    }
    # the outcome stored with the run carries the same decision
    with connect(str(history_root)) as con:
        (ref,) = find_runs(con, run["run_id"])
        stored = committed_outcome(con, ref)
    assert stored is not None
    assert stored.telemetry_not_supplied == {
        "is_grounded": ("grounding_source",),
        "no_topic_drift_to_none": ("grounding_source",),
    }
    assert stored.check("per_turn_grounded_rate").verdict == "n/a"  # type: ignore[union-attr]


def test_a_predicate_listed_as_expected_reads_na_without_failing_its_case(history_root: Path) -> None:
    # deterministic_fluency lists surface_provenance_match among a case's expected predicates:
    # the case's contract row is judged over the predicates that apply.
    with scripted(PLAIN) as server:
        run = _run(server.base_url, "deterministic_fluency")
    for table in ("turn_predicates", "case_predicates"):
        for row in _rows(run, table, "surface_provenance_match"):
            assert (row["passed"], row["code"]) == (None, NA), row
    (message,) = {row["message"] for row in _rows(run, "case_predicates", "surface_provenance_match")}
    assert message == (
        "surface_provenance_match does not apply: the runtime supplied none of the telemetry it reads "
        "(grounding_source, surface_tag)."
    )
    assert run["metrics"]["surface_provenance_match_rate"] is None
    assert run["telemetry_not_supplied"] == {"surface_provenance_match": ["grounding_source", "surface_tag"]}
    assert all(
        row["code"] != "contract_failed" for row in _rows(run, "case_predicates", "expected_predicates")
    )


def test_a_predicate_reading_one_supplied_field_is_judged(history_root: Path) -> None:
    with scripted(SOURCED) as server:
        run = _run(server.base_url, "deterministic_fluency")
    rows = _rows(run, "turn_predicates", "surface_provenance_match")
    assert all(row["code"] != NA and row["passed"] is not None for row in rows), rows
    assert run["metrics"]["surface_provenance_match_rate"] is not None
    assert run["telemetry_not_supplied"] == {}
