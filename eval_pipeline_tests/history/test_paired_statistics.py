"""The paired statistics against independent oracles: statsmodels' exact McNemar, SciPy's
binomial test, and the bootstrap interval's coverage of a known paired difference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar

from eval_pipeline.metrics.paired import (
    binomial_lower_tail,
    bootstrap_deltas,
    bootstrap_p_value,
    bootstrap_worse_p_value,
    holm,
    mcnemar_exact,
    mcnemar_one_sided,
    paired_counts,
    paired_figures,
    percentile_interval,
    verdict_words,
)


def interval(
    counted_a: np.ndarray,
    applicable_a: np.ndarray,
    counted_b: np.ndarray,
    applicable_b: np.ndarray,
    **options: int,
) -> tuple[float, float]:
    return percentile_interval(bootstrap_deltas(counted_a, applicable_a, counted_b, applicable_b, **options))


TABLE_CELL = st.integers(min_value=0, max_value=400)


@settings(max_examples=600, deadline=None)
@example(both=0, only_a=0, only_b=0, neither=0)  # no discordant pair
@example(both=0, only_a=1, only_b=0, neither=0)  # n = 1
@example(both=1, only_a=0, only_b=0, neither=0)
@given(both=TABLE_CELL, only_a=TABLE_CELL, only_b=TABLE_CELL, neither=TABLE_CELL)
def test_exact_mcnemar_agrees_with_statsmodels_and_scipy(
    both: int, only_a: int, only_b: int, neither: int
) -> None:
    p = mcnemar_exact(only_a, only_b)
    oracle = mcnemar([[both, only_a], [only_b, neither]], exact=True).pvalue
    assert abs(p - oracle) <= 1e-12
    n = only_a + only_b
    if n:  # SciPy needs at least one trial; with none the p-value is 1 (statsmodels says so above)
        assert abs(p - binomtest(only_a, n, 0.5).pvalue) <= 1e-12
        worse = binomtest(only_a, n, 0.5, alternative="greater").pvalue
        assert abs(mcnemar_one_sided(only_a, only_b) - worse) <= 1e-12
    else:
        assert p == 1.0


@pytest.mark.parametrize(("only_a", "only_b"), [(0, 0), (1, 0), (0, 1), (9, 0), (3, 3), (0, 25_000)])
def test_edge_tables(only_a: int, only_b: int) -> None:
    oracle = mcnemar([[0, only_a], [only_b, 0]], exact=True).pvalue
    assert abs(mcnemar_exact(only_a, only_b) - oracle) <= 1e-12


def test_big_tails_agree_with_scipy() -> None:
    for k, n in ((24_000, 50_000), (49_000, 100_000), (50_000, 100_000), (1_000, 30_000)):
        assert binomial_lower_tail(k, n) == pytest.approx(
            binomtest(k, n, 0.5, alternative="less").pvalue, rel=1e-9, abs=1e-300
        )


def test_nine_discordant_pairs_all_one_way() -> None:
    a = np.array([1] * 15)
    b = np.array([1] * 6 + [0] * 9)
    figures = paired_figures(a, np.ones(15), b, np.ones(15))
    assert figures is not None and figures.counts == paired_counts(a, b)
    assert (figures.counts.only_a, figures.counts.only_b) == (9, 0)
    assert figures.p_value == 0.00390625 and figures.delta == pytest.approx(-0.6)
    assert figures.ci_high < 0
    assert verdict_words(figures, figures.p_value, higher_is_better=True) == "B worse"
    assert verdict_words(figures, figures.p_value, higher_is_better=False) == "B better"


def test_one_flip_in_fifteen_is_no_detectable_difference() -> None:
    figures = paired_figures(np.ones(15), np.ones(15), np.array([1] * 14 + [0]), np.ones(15))
    assert figures is not None and figures.p_value == 1.0
    assert verdict_words(figures, figures.p_value, higher_is_better=True) == (
        "no detectable difference at α = 0.05, n = 15"
    )


def test_a_single_case() -> None:
    figures = paired_figures([1], [1], [0], [1])
    assert figures is not None and figures.counts == paired_counts([1], [0])
    assert figures.p_value == 1.0 and (figures.ci_low, figures.ci_high) == (-1.0, -1.0)


def test_repeats_are_clustered_and_not_a_mcnemar_table() -> None:
    # 5 samples per case: 3 of 5 pass on A, 5 of 5 on B, in each of 20 cases.
    figures = paired_figures(np.full(20, 3), np.full(20, 5), np.full(20, 5), np.full(20, 5))
    assert figures is not None and figures.clustered and figures.counts is None
    assert figures.delta == pytest.approx(0.4) and figures.ci_low == pytest.approx(0.4)
    # Every resample moves the same way: no resample at or below 0, so p = 2 · (0 + 1) / (R + 1).
    assert figures.p_value == 2 / (figures.resamples + 1)
    assert (figures.verdicts_a, figures.verdicts_b) == (100, 100)
    assert verdict_words(figures, None, higher_is_better=True) == "B better"


def test_bootstrap_p_values_count_the_resamples_on_each_side_of_zero() -> None:
    deltas = np.array([-0.2, -0.1, 0.0, 0.1, 0.3, 0.4, 0.5, 0.6, 0.7])  # 3 at or below 0, 7 at or above
    assert bootstrap_p_value(deltas) == pytest.approx(2 * (3 + 1) / 10)
    assert bootstrap_worse_p_value(deltas, higher_is_better=True) == pytest.approx((7 + 1) / 10)
    assert bootstrap_worse_p_value(deltas, higher_is_better=False) == pytest.approx((3 + 1) / 10)
    assert bootstrap_p_value(np.zeros(50)) == 1.0  # nothing moved: no evidence of a difference


def test_the_clustered_p_value_holds_its_level_and_finds_a_real_difference() -> None:
    """500 seeded simulations of 40 cases × 10 correlated turns: with no difference the p-value
    is below 0.05 about 5% of the time; with a real one, nearly always."""
    rng = np.random.default_rng(11)
    cases, rejected_null, rejected_real = 40, 0, 0
    for simulation in range(500):
        ability = rng.beta(2, 2, cases)  # turns of one case share their pass chance
        ten = np.full(cases, 10, dtype=np.int64)
        a, same = rng.binomial(10, ability), rng.binomial(10, ability)
        better = rng.binomial(10, np.clip(ability + 0.25, 0, 1))
        null = paired_figures(a, ten, same, ten, resamples=1_000, seed=simulation)
        real = paired_figures(a, ten, better, ten, resamples=1_000, seed=simulation)
        assert null is not None and real is not None and null.clustered
        rejected_null += null.p_value < 0.05
        rejected_real += real.p_value < 0.05
    assert rejected_null / 500 <= 0.08
    assert rejected_real / 500 >= 0.9


def test_cases_not_applicable_on_a_side_are_left_out() -> None:
    figures = paired_figures([1, 0, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0])
    assert figures is not None and figures.cases == 1 and figures.delta == -1.0
    assert paired_figures([1], [1], [0], [0]) is None


def test_the_interval_is_reproducible_and_the_seed_matters() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    ones = np.ones(200, dtype=np.int64)
    first = interval(a, ones, b, ones)
    assert first == interval(a, ones, b, ones)
    assert first != interval(a, ones, b, ones, seed=1)


def test_the_bootstrap_interval_covers_a_known_paired_difference() -> None:
    """500 seeded simulations of 200 correlated pairs, a true difference of 0.1: the 95% interval
    holds it at (about) the nominal rate."""
    rng = np.random.default_rng(20261201)
    cases, true_delta, covered = 200, 0.1, 0
    for simulation in range(500):
        latent = rng.random(cases)
        a = (latent < 0.6).astype(np.int64)  # pass rate 0.6
        b = (latent < 0.7).astype(np.int64)  # 0.7, and every case A passes B passes too
        flip = rng.random(cases) < 0.2  # some pairs lose their correlation
        b[flip] = (rng.random(int(flip.sum())) < 0.7).astype(np.int64)
        ones = np.ones(cases, dtype=np.int64)
        low, high = interval(a, ones, b, ones, resamples=2_000, seed=simulation)
        covered += low <= true_delta <= high
    assert covered / 500 >= 0.93


def test_the_clustered_interval_covers_a_known_difference_of_repeated_samples() -> None:
    """Cases of 5 samples each whose pass chance varies by case: resampling whole cases keeps the
    interval honest where treating samples as cases would make it too narrow."""
    rng = np.random.default_rng(7)
    cases, covered = 60, 0
    for simulation in range(500):
        ability = rng.beta(2, 2, cases)  # how likely each case passes on A
        a = rng.binomial(5, ability)
        b = rng.binomial(5, np.clip(ability + 0.1, 0, 1))
        true_delta = float(np.clip(ability + 0.1, 0, 1).mean() - ability.mean())
        five = np.full(cases, 5, dtype=np.int64)
        low, high = interval(a, five, b, five, resamples=2_000, seed=simulation)
        covered += low <= true_delta <= high
    assert covered / 500 >= 0.93


def test_holm_against_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert holm([0.01, None, 0.02]) == [0.02, None, 0.02]
