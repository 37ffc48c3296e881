"""diff, flaky, first-failure and the regression findings over a history with known flips."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.core.series import Series
from eval_pipeline.history.regression import MetricFinding, find_regressions
from eval_pipeline.lanes import find_lane, lane_kind
from eval_pipeline.metrics.intervals import wilson_interval
from eval_pipeline.run.pipeline import LaneRun

from .conftest import FLIPPING_CASES, FLIPPING_PREDICATES, LANE, SPLIT

runner = CliRunner()


def invoke_json(*args: str) -> object:
    result = runner.invoke(app, [*args, "--format", "json"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(14, 15) or (0, 0)
    assert (round(low, 4), round(high, 4)) == (0.7018, 0.9881)
    low, high = wilson_interval(15, 15) or (0, 0)
    assert (round(low, 4), high) == (0.7961, 1.0)
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="between 0 and trials"):
        wilson_interval(16, 15)


def test_diff_default_is_last_two_runs_of_each_series(history: str) -> None:
    diffs = invoke_json("diff")
    assert [(d["run_a"], d["run_b"]) for d in diffs] == [("run-c3", "run-c4"), ("run-r1", "run-r2")]
    candidate, reference = diffs
    assert reference["flips"] == []
    deltas = {m["metric"]: m["delta"] for m in candidate["metrics"]}
    assert deltas["no_provenance_only_rate"] == pytest.approx(-0.6)
    assert deltas["complete_punctuation_rate"] == 0
    flips = candidate["flips"]
    assert {(f["case_id"], f["predicate"]) for f in flips} == {
        (c, p) for c in FLIPPING_CASES for p in FLIPPING_PREDICATES
    }
    assert {f["change"] for f in flips} == {"pass→fail"}
    first = flips[0]
    assert first["surface_a"].startswith("A belief is a claim")
    assert first["surface_b"].startswith("belief — pack-grounded")


def test_diff_lists_pass_to_fail_before_fail_to_pass(history: str) -> None:
    # c2 (no gloss) → c4 (no gloss) flips nothing; c4 → c3 is pure fail→pass; c2 → c1 likewise.
    (diff,) = invoke_json("diff", "run-c4", "run-c3")
    assert {f["change"] for f in diff["flips"]} == {"fail→pass"}
    (diff,) = invoke_json("diff", "run-r1", "run-c2")  # a glossed runtime against a no-gloss one
    assert diff["runtime_a"] == "reference" and diff["runtime_b"] == "candidate"
    changes = [f["change"] for f in diff["flips"]]
    assert changes and changes == sorted(changes, key=lambda c: c != "pass→fail")


def test_diff_orders_mixed_changes(history: str, lane_runs: dict[bool, LaneRun]) -> None:
    from .conftest import StoredRun, record_run

    mixed = lane_runs[True].case_predicates.copy()
    # One case now fails no_placeholder, one no-gloss failure is now a pass: a mixed diff.
    mixed.loc[(mixed.case_id == "fluency_truth_001") & (mixed.predicate == "no_placeholder"), "passed"] = (
        False
    )
    run = LaneRun(**{**lane_runs[True].__dict__, "case_predicates": mixed})
    record_run(history, run, StoredRun("run-c5", "candidate", "2024-04-02", True))
    (diff,) = invoke_json("diff", "run-c4", "run-c5")
    changes = [f["change"] for f in diff["flips"]]
    assert changes[0] == "pass→fail"
    assert (diff["flips"][0]["case_id"], diff["flips"][0]["predicate"]) == (
        "fluency_truth_001",
        "no_placeholder",
    )
    assert changes.count("pass→fail") == 1 and set(changes[1:]) == {"fail→pass"}


def test_diff_unknown_run_exits_2(history: str) -> None:
    result = runner.invoke(app, ["diff", "run-c1", "no-such-run"])
    assert result.exit_code == 2 and "no run 'no-such-run'" in result.output


def test_flaky_rates_and_wilson_bounds(history: str) -> None:
    report = invoke_json("flaky", "--lane", LANE, "--last", "4")
    assert isinstance(report, dict)
    cases = report["cases"]
    assert {(c["case_id"], c["predicate"]) for c in cases} == {
        (c, p) for c in FLIPPING_CASES for p in FLIPPING_PREDICATES
    }
    assert all(
        (c["runtime"], c["flips"], c["alternations"], c["transitions"], c["flip_rate"])
        == ("candidate", 3, 2, 3, 1.0)
        for c in cases
    )
    # Over the last 2 runs only one transition is seen: a flip, not yet an alternation.
    last_two = invoke_json("flaky", "--last", "2", "--all")["cases"]  # type: ignore[index]
    flipped_once = [c for c in last_two if c["flips"]]
    assert {(c["transitions"], c["flip_rate"], c["alternations"]) for c in flipped_once} == {(1, 1.0, 0)}
    assert invoke_json("flaky", "--last", "2")["cases"] == []  # type: ignore[index]
    rates = {(r["runtime"], r["metric"]): r for r in report["rates"]}
    steady = rates[("reference", "no_provenance_only_rate")]
    assert (steady["numerator"], steady["denominator"]) == (14, 15)
    assert steady["wilson_low"] == pytest.approx(0.70183, abs=1e-4)
    assert steady["previous_within_interval"] is True
    moved = rates[("candidate", "no_provenance_only_rate")]
    assert (moved["value"], moved["previous_value"]) == (pytest.approx(1 / 3), pytest.approx(14 / 15))
    assert moved["wilson_high"] < moved["previous_value"] and moved["previous_within_interval"] is False
    assert (moved["window_min"], moved["window_max"], moved["runs"]) == (
        pytest.approx(1 / 3),
        pytest.approx(14 / 15),
        4,
    )


def test_flaky_needs_two_runs() -> None:
    result = runner.invoke(app, ["flaky", "--last", "1"])
    assert result.exit_code == 2 and "at least 2" in result.output


def test_first_failure_names_the_run_and_the_surface_change(history: str) -> None:
    rows = invoke_json("first-failure", "fluency_truth_001", "--predicate", "no_provenance_only")
    assert isinstance(rows, list) and len(rows) == 1
    (row,) = rows
    assert (row["runtime"], row["run_id"], row["date"], row["previous_run_id"]) == (
        "candidate",
        "run-c2",
        "2024-03-02",
        "run-c1",
    )
    assert row["surface_before"].endswith("Pack-grounded (en_core_meta_v1).")
    assert (
        row["surface_change"].startswith("[-Truth is") and "{+truth — pack-grounded" in row["surface_change"]
    )


def test_first_failure_of_a_case_that_never_flipped_and_of_an_unknown_case(history: str) -> None:
    assert invoke_json("first-failure", "fluency_cause_tides_014") == []
    result = runner.invoke(app, ["first-failure", "fluency_cause_tides_014"])
    assert result.exit_code == 0 and "never failed" in result.output
    result = runner.invoke(app, ["first-failure", "no_such_case"])
    assert result.exit_code == 2 and "no verdicts for case 'no_such_case'" in result.output


FLUENCY_ROWS = lane_kind(find_lane(LANE)).metric_rows


def regressions(
    history: str, run: LaneRun, case_predicates: pd.DataFrame | None = None
) -> dict[str, MetricFinding]:
    found = find_regressions(
        history,
        series=Series(LANE, SPLIT, "reference", SPLIT),
        metrics=run.metrics,
        case_predicates=run.case_predicates if case_predicates is None else case_predicates,
        metric_rows=FLUENCY_ROWS,
    )
    return {f.metric: f for f in found}


def test_regression_findings_against_the_previous_run(history: str, lane_runs: dict[bool, LaneRun]) -> None:
    findings = regressions(history, lane_runs[False])
    provenance = findings["no_provenance_only_rate"]
    assert provenance.previous_run_id == "run-r2"
    assert provenance.delta == pytest.approx(-0.6)
    assert (provenance.cases, provenance.worse, provenance.better) == (15, 9, 0)
    assert provenance.p_value == pytest.approx(0.5**9)  # one-sided exact McNemar
    assert provenance.regressed is True and "significantly worse" in provenance.note
    assert provenance.flipped_case_ids == tuple(sorted(FLIPPING_CASES))
    assert findings["no_placeholder_rate"].regressed is False
    assert findings["cases"].regressed is False and findings["cases"].p_value is None


def test_one_flip_is_not_significant_unless_the_rate_is_pinned(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    """One case going pass→fail on 15: p = 0.5, not a regression of a floor, but a regression of a
    rate pinned at == 1 (no_placeholder_rate)."""
    run = lane_runs[True]
    one = run.case_predicates.copy()
    truth = one["case_id"].eq("fluency_truth_001")
    for predicate in ("no_provenance_only", "no_placeholder"):
        one.loc[truth & one["predicate"].eq(predicate), "passed"] = False
    findings = regressions(history, run, one)
    provenance = findings["no_provenance_only_rate"]  # threshold >= (not pinned)
    assert (provenance.worse, provenance.better, provenance.p_value) == (1, 0, 0.5)
    assert provenance.regressed is False and "not significantly worse" in provenance.note
    placeholder = findings["no_placeholder_rate"]  # == 1: pinned
    assert placeholder.regressed is True and placeholder.flipped_case_ids == ("fluency_truth_001",)
    assert "pinned at 1" in placeholder.note


def test_regression_without_a_previous_run(history: str, lane_runs: dict[bool, LaneRun]) -> None:
    findings = find_regressions(
        history,
        series=Series(LANE, SPLIT, "never-ran", SPLIT),
        metrics=lane_runs[False].metrics,
        case_predicates=lane_runs[False].case_predicates,
        metric_rows=FLUENCY_ROWS,
    )
    assert findings and all(not f.regressed and f.previous_value is None for f in findings)


def test_a_lasting_regression_is_not_flaky_and_first_failure_reports_it(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    """reference: pass, pass, then fail and stay failed. Today flaky lists it (flip_rate 0.5)."""
    from .conftest import StoredRun, record_run

    record_run(history, lane_runs[False], StoredRun("run-r3", "reference", "2024-03-03", False))
    flaky = invoke_json("flaky", "--lane", LANE)["cases"]  # type: ignore[index]
    assert {c["runtime"] for c in flaky} == {"candidate"}  # the alternating series only
    assert {c["alternations"] for c in flaky} == {2}
    every = invoke_json("flaky", "--lane", LANE, "--all")["cases"]  # type: ignore[index]
    step = next(
        c
        for c in every
        if (c["runtime"], c["case_id"], c["predicate"])
        == ("reference", "fluency_truth_001", "no_provenance_only")
    )
    assert (step["flips"], step["alternations"]) == (1, 0)
    (row,) = invoke_json(
        "first-failure", "fluency_truth_001", "--predicate", "no_provenance_only", "--runtime", "reference"
    )  # type: ignore[misc]
    assert (row["run_id"], row["previous_run_id"], row["since"]) == ("run-r3", "run-r2", "went pass→fail")


def test_first_failure_of_an_always_failing_case(history: str) -> None:
    """A case failing in every run: today "never went from pass to fail"."""
    rows = invoke_json("first-failure", "fluency_courage_010", "--runtime", "reference")
    assert isinstance(rows, list) and rows
    assert {r["predicate"] for r in rows} == set(FLIPPING_PREDICATES)
    assert {(r["run_id"], r["since"], r["previous_run_id"]) for r in rows} == {
        ("run-r1", "failing since its first run (2024-03-01)", None)
    }
