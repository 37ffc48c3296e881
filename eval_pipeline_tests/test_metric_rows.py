"""Metric → predicate comes from the lane's declaration, never from the metric's name."""

from __future__ import annotations

import pandas as pd

from eval_pipeline.core.series import Series
from eval_pipeline.lanes import find_lane, lane_kind
from eval_pipeline.lanes.metric_rows import MetricRows, higher_is_better, is_pinned
from eval_pipeline.metrics.scoring import judge, measurement
from eval_pipeline.outcome.failures import failing_cases
from eval_pipeline.outcome.run_outcome import failing_items, judged_outcome
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime


def test_the_refusal_rate_check_lists_refused_failures_only() -> None:
    """``refusal_rate`` counts ``refused`` (not "refusal"): its failing-case table must not list the
    same cases' ``no_fabrication`` failures, which count against ``fabrication_rate``."""
    spec = find_lane("refusal_calibration")
    run = evaluate_lane(spec, "public", build_runtime("reference:no-refusal"))
    refusal = next(m for m in run.metric_values if m.metric == "refusal_rate")
    assert refusal.failing_case_ids
    failing = run.case_predicates[run.case_predicates["passed"].eq(False).fillna(False)]
    assert {"refused", "no_fabrication"} <= set(failing["predicate"])  # both fail on these cases
    items, results, cases = failing_items(failing_cases([run.case_predicates], 1), pd.DataFrame(), {})
    outcome = judged_outcome(
        Series(spec.name, "public", "reference-no-refusal", "public"),
        "run",
        judge(spec.effective_thresholds, run.metric_values),
        measurement(run.metric_values, spec.max_error_rate),
        (items, results, cases),
        run.transcripts,
    )
    rows = outcome.items_of(refusal.failing_case_ids, lane_kind(spec).metric_rows["refusal_rate"].predicates)
    assert {item.predicate for item in rows} == {"refused"}
    assert {item.case_id for item in rows} == set(refusal.failing_case_ids)


def test_declared_and_kind_lanes_say_what_each_rate_counts() -> None:
    refusal = lane_kind(find_lane("refusal_calibration")).metric_rows
    assert refusal["refusal_rate"] == MetricRows(frozenset({"refused"}))
    assert refusal["fabrication_rate"] == MetricRows(frozenset({"no_fabrication"}), counts_failures=True)
    assert "overall_pass" not in refusal and "cases" not in refusal  # derived metric, count
    warm = lane_kind(find_lane("warmed_session_consistency")).metric_rows
    assert warm["no_placeholder_rate"] == MetricRows(frozenset({"no_warm_placeholder"}), over="turns")
    i18n = lane_kind(find_lane("i18n_prompt")).metric_rows
    assert i18n["hard_pass_rate"] == MetricRows(None, severity="hard")


def test_which_way_is_better_and_what_is_pinned() -> None:
    failures = MetricRows(frozenset({"no_fabrication"}), counts_failures=True)
    assert not higher_is_better(failures) and higher_is_better(MetricRows(frozenset({"refused"})))
    assert higher_is_better(None, ">=", 0.9) and not higher_is_better(None, "==", 0.0)
    assert higher_is_better(failures, "==", 1.0)
    assert is_pinned("==", 1.0) and is_pinned("==", 0) and not is_pinned(">=", 1.0)
    assert not is_pinned("==", 0.5) and not is_pinned(None, None)
