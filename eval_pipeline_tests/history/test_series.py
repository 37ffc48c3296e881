"""Series: (lane, split, runtime, case set). A ``--cases`` run is its own series, and runs of
different case sets are compared on their common cases only, and say so."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.core.series import Series
from eval_pipeline.history.charts import lane_charts
from eval_pipeline.history.regression import MetricFinding, find_regressions
from eval_pipeline.history.views import connect
from eval_pipeline.lanes import find_lane, lane_kind
from eval_pipeline.run.pipeline import LaneRun

from .conftest import FLIPPING_CASES, FLIPPING_PREDICATES, LANE, SPLIT, StoredRun, record_run

runner = CliRunner()
CUSTOM = "custom-1a2b3c4d"
# A --cases file holding the nine pack_definition cases, run with glosses off.
CUSTOM_RUN = StoredRun("run-custom", "reference", "2024-03-03", False, case_set=CUSTOM, cases_sha256="1" * 64)


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.output


def subset(run: LaneRun, case_ids: tuple[str, ...]) -> LaneRun:
    keep = {
        name: getattr(run, name)[getattr(run, name)["case_id"].isin(case_ids)].reset_index(drop=True)
        for name in ("case_predicates", "transcripts")
    }
    return LaneRun(**{**run.__dict__, **keep})


@pytest.fixture
def with_custom(history: str, lane_runs: dict[bool, LaneRun]) -> str:
    record_run(history, subset(lane_runs[False], FLIPPING_CASES), CUSTOM_RUN)
    return history


def findings(
    root: str, run: LaneRun, *, case_set: str = SPLIT, sha: str | None = None
) -> dict[str, MetricFinding]:
    metrics = run.metrics if sha is None else run.metrics.assign(cases_sha256=sha)
    found = find_regressions(
        root,
        series=Series(LANE, SPLIT, "reference", case_set),
        metrics=metrics,
        case_predicates=run.case_predicates,
        metric_rows=lane_kind(find_lane(LANE)).metric_rows,
    )
    return {f.metric: f for f in found}


def test_a_cases_run_never_enters_the_nightly_series(history: str, lane_runs: dict[bool, LaneRun]) -> None:
    nightly_before = findings(history, lane_runs[True])
    record_run(history, subset(lane_runs[False], FLIPPING_CASES), CUSTOM_RUN)  # started after run-r2
    assert findings(history, lane_runs[True]) == nightly_before
    assert {f.previous_run_id for f in nightly_before.values()} == {"run-r2"}
    assert not any(f.regressed for f in nightly_before.values())
    # ... and the nightly series never becomes the --cases series' previous run.
    custom = findings(history, lane_runs[True], case_set=CUSTOM)
    assert {f.previous_run_id for f in custom.values()} == {"run-custom"}
    with connect(history) as con:
        rows = con.execute(
            "SELECT case_set, run_id, seq FROM runs WHERE runtime = 'reference' ORDER BY case_set, seq"
        ).fetchall()
    assert rows == [(CUSTOM, "run-custom", 1), (SPLIT, "run-r1", 1), (SPLIT, "run-r2", 2)]
    code, output = invoke("diff", "-f", "json")
    assert code == 0 and [(d["run_a"], d["run_b"]) for d in json.loads(output)] == [
        ("run-c3", "run-c4"),
        ("run-r1", "run-r2"),
    ]
    code, output = invoke("flaky", "-f", "json", "--all")
    custom_rows = [c for c in json.loads(output)["cases"] if c["case_set"] == CUSTOM]
    assert custom_rows and {(c["runtime"], c["transitions"]) for c in custom_rows} == {("reference", 0)}


def test_diff_across_case_sets_compares_common_cases_and_says_so(with_custom: str) -> None:
    code, output = invoke("diff", "run-r2", "run-custom", "-f", "json")
    assert code == 0, output
    (diff,) = json.loads(output)
    assert (diff["case_set_a"], diff["case_set_b"]) == (SPLIT, CUSTOM)
    assert diff["note"] == (
        f"case sets differ ({SPLIT} vs {CUSTOM}): comparing the 9 common cases only (15 vs 9 cases); "
        "metric deltas not computed"
    )
    # The six cases the custom file left out are not reported as pass→n/a.
    assert {(f["case_id"], f["predicate"]) for f in diff["flips"]} == {
        (c, p) for c in FLIPPING_CASES for p in FLIPPING_PREDICATES
    }
    assert {m["delta"] for m in diff["metrics"]} == {None}
    code, output = invoke("diff", "run-r2", "run-custom")
    assert code == 0 and "note: case sets differ" in output


def test_changed_case_files_in_a_series_are_not_compared(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    edited = findings(history, lane_runs[False], sha="2" * 64)  # glosses off, case files edited
    provenance = edited["no_provenance_only_rate"]
    assert provenance.previous_run_id == "run-r2" and provenance.regressed is False
    assert provenance.note.startswith("case set changed since run-r2")
    assert provenance.delta is None and provenance.p_value is None
    assert provenance.flipped_case_ids == tuple(sorted(FLIPPING_CASES))  # flips on the common cases
    assert not any(f.regressed for f in edited.values())
    # The same tables with the same case files do regress: the change of case set is what held it.
    assert findings(history, lane_runs[False], sha="0" * 64)["no_provenance_only_rate"].regressed is True

    record_run(
        history,
        lane_runs[False],
        StoredRun("run-r3", "reference", "2024-03-03", False, cases_sha256="2" * 64),
    )
    code, output = invoke("diff", "--lane", LANE, "-f", "json")
    assert code == 0, output
    reference = next(d for d in json.loads(output) if d["runtime_b"] == "reference")
    assert (reference["run_a"], reference["run_b"]) == ("run-r2", "run-r3")
    assert reference["note"].startswith(
        f"case set changed ({SPLIT}: case files differ): comparing the 15 common"
    )


def test_first_failure_per_runtime_and_split(history: str) -> None:
    code, output = invoke(
        "first-failure", "fluency_truth_001", "--runtime", "candidate", "--split", SPLIT, "-f", "json"
    )
    assert code == 0 and {r["run_id"] for r in json.loads(output)} == {"run-c2"}
    code, output = invoke("first-failure", "fluency_truth_001", "--runtime", "reference")
    assert code == 0, output
    assert f"never failed in 1 series: {LANE}/{SPLIT} [reference]" in output
    code, output = invoke("first-failure", "fluency_truth_001", "--runtime", "nope")
    assert code == 2 and "no verdicts for case 'fluency_truth_001' (runtime 'nope')" in output


def test_trend_charts_draw_a_line_per_series(with_custom: str) -> None:
    with connect(with_custom) as con:
        charts = lane_charts(con, LANE)
    provenance = next(c for c in charts if "<title>no_provenance_only_rate</title>" in c)
    assert provenance.count("■") == 3
    assert "■ public · candidate<" in provenance and "■ public · reference<" in provenance
    assert f"■ public · reference · {CUSTOM}<" in provenance
