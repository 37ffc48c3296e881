"""A bot that passes each case with probability 0.7, sampled 20 times per case.

Ground truth is known, so the figures the pipeline reports can be checked against it: the
per-case pass rates lie in the binomial interval of 0.7, pass^k is its formula, and the
gate on the lower bound passes and fails where the documentation says it does.
"""

from __future__ import annotations

from math import comb
from pathlib import Path

import pandas as pd
import pytest

from eval_pipeline.cli.run_tables import RunTables, print_case
from eval_pipeline.lanes import discover_lanes
from eval_pipeline.lanes.spec import LaneSpec, ThresholdSpec
from eval_pipeline.metrics.intervals import wilson_interval
from eval_pipeline.metrics.samples import case_samples, derive_seed
from eval_pipeline.metrics.scoring import judge
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.samples.conftest import CASES

TRUTH = 0.7
REPEAT = 20
RUN_SEED = 20261201
BOT = "python:eval_pipeline_tests.samples.coin_bot:CoinBot"
Z_FAMILY = 4.0  # two-sided ~6e-5 per case: 40 cases all inside by chance with probability > 0.997


def lane() -> LaneSpec:
    return next(spec for spec in discover_lanes() if spec.name == "sampled")


def sampled_run(repeat: int = REPEAT, seed: int | None = RUN_SEED) -> LaneRun:
    runtime = build_runtime(BOT, {"kwargs": {"pass_probability": TRUTH}})
    return evaluate_lane(lane(), "dev", runtime, concurrency=8, repeat=repeat, seed=seed)


@pytest.fixture
def run(sampled_evals: Path) -> LaneRun:
    return sampled_run()


def test_every_case_is_sampled_in_fresh_sessions_with_recorded_seeds(run: LaneRun) -> None:
    transcripts = run.transcripts
    assert len(transcripts) == CASES * REPEAT
    assert sorted(transcripts["sample_index"].unique()) == list(range(REPEAT))
    expected = [
        derive_seed(RUN_SEED, c, i)
        for c, i in zip(transcripts["case_id"], transcripts["sample_index"], strict=True)
    ]
    assert transcripts["seed"].tolist() == expected
    for table in (run.turn_predicates, run.case_predicates):
        assert len(table) == CASES * REPEAT and set(table["sample_index"]) == set(range(REPEAT))


def test_per_case_pass_rates_lie_in_the_binomial_interval_of_the_truth(run: LaneRun) -> None:
    summary = case_samples(run.case_predicates)
    assert len(summary) == CASES and (summary["samples"] == REPEAT).all()
    low, high = wilson_interval(TRUTH * REPEAT, REPEAT, z=Z_FAMILY) or (0.0, 1.0)
    outside = summary[(summary["pass_rate"] < low) | (summary["pass_rate"] > high)]
    assert outside.empty, outside
    assert summary["pass_rate"].nunique() > 1  # the samples really differ
    metric = next(m for m in run.metric_values if m.metric == "punctuation_rate")
    assert metric.samples == REPEAT and metric.denominator == CASES * REPEAT
    pooled_low, pooled_high = metric.interval or (0.0, 0.0)
    assert pooled_low <= TRUTH <= pooled_high


def test_pass_hat_k_is_its_formula(run: LaneRun) -> None:
    summary = case_samples(run.case_predicates, k=3)
    expected = [comb(c, 3) / comb(REPEAT, 3) for c in summary["passes"]]
    assert summary["pass_hat_k"].tolist() == pytest.approx(expected)
    # Averaged over cases the estimator is unbiased for p^k: 0.343 at p = 0.7, k = 3.
    assert summary["pass_hat_k"].mean() == pytest.approx(TRUTH**3, abs=0.12)
    all_k = case_samples(run.case_predicates)  # k = every sample: 1 only when all 20 passed
    assert set(all_k["pass_hat_k"]) <= {0.0, 1.0}
    metric = next(m for m in run.metric_values if m.metric == "punctuation_rate")
    assert metric.pass_hat_k == pytest.approx((all_k["passes"] == REPEAT).sum() / CASES)


def test_the_gate_is_on_the_lower_bound_unless_the_threshold_names_another(run: LaneRun) -> None:
    metric = next(m for m in run.metric_values if m.metric == "punctuation_rate")
    low = metric.statistic("lower_bound")
    assert metric.value is not None and low is not None and low < metric.value
    between = (low + metric.value) / 2  # the mean clears it, the lower bound does not
    reason = "test"
    default = ThresholdSpec(
        metric="punctuation_rate", op=">=", value=between, severity="ERROR", reason=reason
    )
    on_mean = default.model_copy(update={"statistic": "mean"})
    below = default.model_copy(update={"value": low - 0.01})
    on_pass_hat_k = below.model_copy(update={"statistic": "pass_hat_k"})
    verdicts = judge([default, on_mean, below, on_pass_hat_k], run.metric_values)
    assert [(v.statistic, v.passed) for v in verdicts] == [
        ("lower_bound", False),
        ("mean", True),
        ("lower_bound", True),
        ("pass_hat_k", False),  # almost no case passes all 20 samples at p = 0.7
    ]
    assert verdicts[0].word == "fail" and verdicts[0].gated_value == low
    row = run.metrics.set_index("metric").loc["punctuation_rate"]
    assert row["statistic"] == "lower_bound" and row["samples"] == REPEAT
    assert row["ci_low"] == pytest.approx(low)


def test_a_seeded_run_is_reproduced_and_one_sample_keeps_todays_tables(sampled_evals: Path) -> None:
    first, again = sampled_run(repeat=3), sampled_run(repeat=3)
    pd.testing.assert_frame_equal(
        first.case_predicates.reset_index(drop=True), again.case_predicates.reset_index(drop=True)
    )
    single = sampled_run(repeat=1, seed=None)
    assert (single.case_predicates["sample_index"] == 0).all() and single.transcripts["seed"].isna().all()
    assert (single.metrics["samples"] == 1).all()
    gated = single.metrics.dropna(subset=["threshold"])
    assert (gated["statistic"] == "mean").all()


def test_show_prints_each_samples_turns_and_verdicts_under_its_number(
    run: LaneRun, capsys: pytest.CaptureFixture[str]
) -> None:
    case_id = str(run.case_predicates["case_id"].iloc[0])
    turns = run.transcripts[run.transcripts["case_id"] == case_id]
    verdicts = run.case_predicates[run.case_predicates["case_id"] == case_id]
    print_case(
        RunTables("r", "sampled", run.case_predicates, run.transcripts, run.turn_predicates, None), case_id
    )
    printed = capsys.readouterr().out
    for sample in range(REPEAT):
        assert f"· sample {sample}\n" in printed
        assert printed.count(f"  sample {sample}: ") == int((verdicts["sample_index"] == sample).sum())
    assert printed.count("  prompt:  ") == len(turns) == REPEAT * turns["turn_index"].nunique()
