"""The pure pieces of repeats: seeds, flips, pass@k / pass^k, pooling, gating, declarations."""

from __future__ import annotations

from math import comb
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.metrics.flips import count_flips, flips_by_group
from eval_pipeline.metrics.samples import all_samples, case_samples, derive_seed, pass_at_k, pass_hat_k, pool
from eval_pipeline.metrics.scoring import MetricValue, gated_statistic
from eval_pipeline.runtimes.targets import (
    TargetsFileError,
    load_targets,
    rescore_name,
    rescore_target,
    resolve_target,
)


def test_seeds_are_stable_and_differ_per_case_and_sample() -> None:
    seeds = {derive_seed(7, case, i) for case in ("a", "b") for i in range(50)}
    assert len(seeds) == 100
    assert derive_seed(7, "a", 3) == derive_seed(7, "a", 3) != derive_seed(8, "a", 3)
    assert all(0 <= s < 2**31 for s in seeds)


def test_a_flip_is_a_change_between_consecutive_verdicts_skipping_nulls() -> None:
    assert count_flips([True, None, True, False, None, False, True]).flips == 2
    assert count_flips([True, None, True, False, None, False, True]).transitions == 4
    assert count_flips([None, True]).flip_rate is None
    assert count_flips([True, False]).flip_rate == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(20, 14, 1), (20, 14, 3), (20, 14, 20), (5, 0, 2), (5, 5, 5)])
def test_pass_at_k_and_pass_hat_k_follow_their_formulas(n: int, c: int, k: int) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(comb(c, k) / comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))
    assert pass_hat_k(n, c, 1) == pytest.approx(c / n) == pytest.approx(pass_at_k(n, c, 1))


def test_case_samples_and_all_samples_of_a_case_predicate_table() -> None:
    rows = [
        {"case_id": "a", "predicate": "p", "passed": v, "code": "ok" if v else "bad", "sample_index": i}
        for i, v in enumerate([True, False, True, True])
    ] + [
        {"case_id": "b", "predicate": "p", "passed": True, "code": "ok", "sample_index": i} for i in range(4)
    ]
    table = pd.DataFrame(rows).astype({"passed": "boolean"})
    summary = case_samples(table).set_index("case_id")
    assert summary.loc["a", ["samples", "passes", "flips"]].tolist() == [4, 3, 2]
    assert summary.loc["a", "pass_hat_k"] == 0.0 and summary.loc["a", "pass_at_k"] == 1.0
    assert summary.loc["b", "pass_hat_k"] == 1.0 and summary.loc["b", "flips"] == 0
    collapsed = all_samples(table, ["case_id", "predicate"]).set_index("case_id")
    assert collapsed.loc["a", "passed"] is False or not collapsed.loc["a", "passed"]
    assert collapsed.loc["a", "code"] == "bad"  # the first failing sample's code
    assert bool(collapsed.loc["b", "passed"])


def test_pooling_adds_counts_and_keeps_one_sample_unchanged() -> None:
    one = [MetricValue("r", 0.5, 1.0, 2.0, ("x",))]
    assert pool([one], []) == one
    pooled = pool(
        [[MetricValue("r", 0.5, 1.0, 2.0, ("x",))], [MetricValue("r", 1.0, 2.0, 2.0)]],
        [MetricValue("r", 0.5, 1.0, 2.0)],
    )[0]
    assert (pooled.value, pooled.numerator, pooled.denominator, pooled.samples) == (0.75, 3.0, 4.0, 2)
    assert pooled.pass_hat_k == 0.5 and pooled.failing_case_ids == ("x",)
    low, high = pooled.interval or (0.0, 0.0)
    assert pooled.statistic("lower_bound") == low < 0.75 < high == pooled.statistic("upper_bound")


def test_the_default_statistic_guards_the_thresholds_side() -> None:
    assert gated_statistic(None, ">=", 1) == "mean"
    assert gated_statistic(None, ">=", 5) == "lower_bound"
    assert gated_statistic(None, "<=", 5) == "upper_bound"
    assert gated_statistic(None, "==", 5) == "mean"
    assert gated_statistic("pass_hat_k", ">=", 1) == "pass_hat_k"


def test_targets_declare_repeat_and_a_bad_one_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "runtimes.yaml"
    path.write_text(
        "targets:\n  noisy: {spec: reference, repeat: 5}\n  bad:\n    spec: reference\n    repeat: 0\n"
    )
    with pytest.raises(TargetsFileError) as raised:
        load_targets(path)
    assert any(f"{path}:5: targets.bad.repeat:" in str(p) for p in raised.value.problems)  # its own line
    path.write_text("targets:\n  noisy: {spec: reference, repeat: 5}\n")
    assert load_targets(path)["noisy"].samples_for(1) == 5


def test_a_rescore_target_is_named_after_its_run_and_back() -> None:
    run_id = "740d3d52-f0d1-4444-be78-a18dcdf9a87b"
    target = resolve_target(f"history:{run_id}", {}, {})
    assert target.name == rescore_name(run_id) == f"rescore-of-{run_id}"
    back = rescore_target(target.name)
    assert back is not None and back.spec == f"history:{run_id}"
    assert rescore_target("reference") is None


@given(st.lists(st.lists(st.sampled_from([True, False, None]), max_size=6), max_size=8))
def test_columnar_flips_agree_with_the_scalar_definition(sequences: list[list[bool | None]]) -> None:
    rows = [
        {"case_id": f"c{case}", "predicate": "p", "passed": verdict, "sample_index": index}
        for case, verdicts in enumerate(sequences)
        for index, verdict in reversed(list(enumerate(verdicts)))  # stored out of order
    ]
    table = pd.DataFrame(rows, columns=["case_id", "predicate", "passed", "sample_index"])
    table = table.astype({"passed": "boolean"})
    counted = flips_by_group(table, ["case_id", "predicate"], "sample_index").set_index("case_id")
    for case, verdicts in enumerate(sequences):
        expected = count_flips(verdicts)
        if expected.verdicts == 0:
            assert f"c{case}" not in counted.index
            continue
        got = counted.loc[f"c{case}"]
        assert (got["verdicts"], got["transitions"], got["flips"]) == (
            expected.verdicts,
            expected.transitions,
            expected.flips,
        )
        assert got["passes"] == sum(v is True for v in verdicts)
