"""Lanes end to end against a real model through ``openai:``, plain and streamed: every turn
answered (no fault), its finish_reason recorded, every verdict computed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from eval_pipeline.lanes import find_lane
from eval_pipeline.metrics.usage import TRUNCATED_TURNS
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.base import ChatRuntime
from eval_pipeline_tests.paths import PROJECT_ROOT

pytestmark = [pytest.mark.real_model, pytest.mark.slow, pytest.mark.xdist_group("real_model")]

MAX_TOKENS = 48  # the CPU is shared: short answers (some cut, which the run must say)
FINISH_REASONS = {"stop", "length"}


@contextmanager
def model(base_url: str, *, stream: bool) -> Iterator[ChatRuntime]:
    runtime = build_runtime(
        f"openai:{base_url}",
        {
            "model": "smollm2",
            "stream": stream,
            "timeout_s": 300,
            "request_params": {"max_tokens": MAX_TOKENS, "temperature": 0},
        },
    )
    try:
        yield runtime
    finally:
        runtime.close()


def assert_measured(run: LaneRun) -> None:
    """Every turn answered with its finish reason, every verdict computed, every metric there."""
    turns = run.transcripts
    assert turns["error"].isna().all(), turns["error"].dropna().tolist()
    assert set(turns["finish_reason"]) <= FINISH_REASONS and turns["finish_reason"].notna().all()
    assert (turns["surface"].str.len() > 0).all()
    assert not (run.turn_predicates["code"] == "turn_error").any()
    assert not (run.case_predicates["code"] == "turn_error").any()
    assert run.case_predicates["message"].notna().all()
    cut = int((turns["finish_reason"] == "length").sum())
    usage = {value.metric: value.value for value in run.metric_values}
    assert usage[TRUNCATED_TURNS] == cut
    failed_on_cut = run.case_predicates[run.case_predicates["passed"] == False]  # noqa: E712
    last_turn = turns.groupby("case_id")["finish_reason"].last()
    for row in failed_on_cut.itertuples():
        if last_turn.get(row.case_id) == "length" and row.predicate != "expected_predicates":
            assert "Cut at the token limit (finish_reason=length)" in row.message, row


def test_fluency_public_streamed(local_model_url: str) -> None:
    with model(local_model_url, stream=True) as runtime:
        run = evaluate_lane(find_lane("deterministic_fluency"), "public", runtime)
    assert_measured(run)
    assert run.transcripts["ttft_ms"].notna().all()  # a streamed reply times its first token
    thresholds = run.metrics[run.metrics["threshold"].notna()]
    assert thresholds["value"].notna().all()


def test_refusal_dev_plain(local_model_url: str) -> None:
    with model(local_model_url, stream=False) as runtime:
        run = evaluate_lane(find_lane("refusal_calibration"), "dev", runtime)
    assert_measured(run)
    assert run.transcripts["ttft_ms"].isna().all()
    rates = run.metrics.set_index("metric")["value"]
    assert pd.notna(rates["refusal_rate"]) and pd.notna(rates["fabrication_rate"])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_few_i18n_cases(local_model_url: str, stream: bool, tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    lines = [
        line
        for name in ("placeholders", "numbers")
        for line in (PROJECT_ROOT / "evals" / "i18n-prompt" / "cases" / "dev" / f"{name}.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()[:2]
    ]
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with model(local_model_url, stream=stream) as runtime:
        run = evaluate_lane(find_lane("i18n_prompt"), "dev", runtime, cases_path=cases)
    assert_measured(run)
    assert len(run.cases) == 4
    rates: dict[str, Any] = run.metrics.set_index("metric")["value"].to_dict()
    assert rates["hard_pass_rate"] is not None and not pd.isna(rates["hard_pass_rate"])
