"""``history`` without --metric: one line per run (its day, id, verdict, series and failing
checks), derived runtime names decoded under it; metric rows on request."""

from __future__ import annotations

import json

from rich.cells import cell_len
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.history_output import title_lines
from eval_pipeline.run.pipeline import LaneRun
from eval_pipeline.runtimes.names import decoded_runtime
from eval_pipeline.runtimes.targets import derived_name

from .conftest import CANDIDATE_RUNS, REFERENCE_RUNS, StoredRun, record_run

WIDTH = 100
RUNS = (*CANDIDATE_RUNS, *REFERENCE_RUNS)


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.output


def test_history_prints_one_line_per_run_with_its_verdict_and_failing_checks(history: str) -> None:
    lines = invoke("history").splitlines()
    assert lines[0].startswith("runs, oldest first")
    run_lines = [line for line in lines if line[:4].isdigit()]
    assert len(run_lines) == len(RUNS)  # not a line per metric
    by_id = {stored.run_id: next(line for line in run_lines if stored.run_id in line) for stored in RUNS}
    for stored in RUNS:
        line = by_id[stored.run_id]
        assert line.startswith(stored.date) and f"deterministic_fluency [public] · {stored.runtime}" in line
        # The glossless runs warn; the rest pass. Their failing checks follow, on the line or under it.
        assert ("warn" if not stored.glossed else "pass") in line.split()
    failing = lines[lines.index(by_id["run-c2"]) + 1]
    assert "no_dotted_inventory_rate" in by_id["run-c2"] + failing
    assert all(cell_len(line) <= WIDTH for line in lines)


def test_metrics_are_shown_on_request(history: str) -> None:
    rows = json.loads(invoke("history", "--metrics", "-f", "json"))
    assert {r["run_id"] for r in rows} == {s.run_id for s in RUNS}
    assert len(rows) > 5 * len(RUNS) and {"metric", "value", "verdict"} <= set(rows[0])
    runs = json.loads(invoke("history", "-f", "json"))
    assert [r["run_id"] for r in runs] == [s.run_id for s in sorted(RUNS, key=lambda s: s.started_at)]
    assert {r["verdict"] for r in runs} == {"pass", "warn"}


def test_a_derived_runtime_name_is_decoded_under_the_runs(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    derived = derived_name("reference:no-gloss", {})
    record_run(history, lane_runs[False], StoredRun("run-x1", derived, "2024-04-02", False))
    output = invoke("history")
    assert f"{derived}: reference:no-gloss" in output.splitlines()
    assert "candidate:" not in output  # a declared-looking name is not decoded


def test_decoding_reads_only_names_derived_from_the_spec() -> None:
    options = {"model": "m"}
    name = derived_name("openai:http://u:secret@host/v1", options)
    decoded = decoded_runtime(name, "openai:http://u:secret@host/v1", options)
    assert decoded == 'openai:http://***@host/v1 {"model": "m"}'  # redacted, as stored
    assert decoded_runtime("reference-no-refusal", "reference:no-refusal") is None  # declared
    assert decoded_runtime(name, "reference") is None  # another scheme's name
    assert decoded_runtime(name, None) is None


def test_a_title_breaks_between_its_parts() -> None:
    parts = ["history", "date 2026-12-07", "lane deterministic_fluency", "split public", "runtime reference"]
    lines = title_lines([*parts, "case_set public"], 90)
    assert lines == [" · ".join(parts), "case_set public"]
    assert title_lines(["x" * 120, "y"], 100) == ["x" * 120, "y"]
