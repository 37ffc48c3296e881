"""Numbers a runtime or a target reports that would break a sum: a token count past any real
reply, a price whose cost overflows. Each is that turn's usage fault; the run ends, its
``--json`` is JSON, and ``--max-cost`` must be a finite amount."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.core.settings import EVALS_ENV
from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.metrics.usage import MAX_TOKEN_COUNT, Price, UsageFault, token_counts, whole_sum
from eval_pipeline.run.drive import Books, Sending, drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.paths import PROJECT_ROOT
from eval_pipeline_tests.resume.helpers import LANE, TURNS_PER_THREAD, write_threads
from eval_pipeline_tests.runtimes.helpers import served_reference
from eval_pipeline_tests.runtimes.scripted_server import completion, json_reply, scripted

HUGE = 10**29


def threads(count: int = 2) -> list[Thread]:
    return [
        Thread(case_id=f"case{i}", turns=(TurnRequest(turn_index=0, role="turn", prompt="What is a river?"),))
        for i in range(count)
    ]


def strict_json(text: str) -> Any:
    """``text`` as JSON, refusing ``Infinity`` and ``NaN`` (which no JSON reader takes)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("count", "said"),
    [
        (HUGE, "prompt_tokens is 1000"),
        (1e29, "prompt_tokens is 1e+29"),
        (-1, "prompt_tokens is -1"),
        (True, "prompt_tokens is True"),
        ("12", "prompt_tokens is '12'"),
        (2.5, "prompt_tokens is 2.5"),
        (MAX_TOKEN_COUNT + 1, "prompt_tokens is 9007199254740992"),
    ],
)
def test_a_token_count_that_is_no_count_is_a_usage_fault(count: object, said: str) -> None:
    with pytest.raises(UsageFault, match=f"usage_fault: {re.escape(said)}.*not a token count"):
        token_counts({"usage": {"prompt_tokens": count, "completion_tokens": 3}})


def test_whole_token_counts_in_range_are_kept() -> None:
    assert token_counts({"usage": {"prompt_tokens": MAX_TOKEN_COUNT, "completion_tokens": 12.0}}) == (
        MAX_TOKEN_COUNT,
        12,
    )
    assert token_counts({"usage": {"prompt_tokens": None}}) == (None, None)


def test_a_cost_that_overflows_is_a_usage_fault_and_a_sum_that_would_is_missing() -> None:
    with pytest.raises(UsageFault, match="cost more than a number can hold"):
        Price(input=1e300, output=1e300).cost(MAX_TOKEN_COUNT, 10)
    assert whole_sum(pd.Series([1.7e308, 1.7e308])) is None
    assert whole_sum(pd.Series([0.25, 0.5])) == 0.75


def test_a_reply_with_a_huge_token_count_is_that_turns_usage_fault() -> None:
    huge = json_reply(
        completion({"content": "A river flows."}, usage={"prompt_tokens": HUGE, "completion_tokens": 3})
    )
    fine = json_reply(
        completion({"content": "A river flows."}, usage={"prompt_tokens": 7, "completion_tokens": 3})
    )
    with scripted(huge, fine) as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "m"})
        try:
            rows = drive(
                runtime, threads(), Sending(concurrency=1), books=Books(price=Price(input=1.0, output=1.0))
            )
        finally:
            runtime.close()
    first, second = rows.to_dict("records")
    assert first["error"].startswith("UsageFault: usage_fault: prompt_tokens is 1000")
    assert first["surface"] == "A river flows." and pd.isna(first["prompt_tokens"]) and pd.isna(first["cost"])
    assert second["error"] is None or pd.isna(second["error"])
    assert (second["prompt_tokens"], second["cost"]) == (7, 10 / 1_000_000)


def test_a_price_whose_cost_overflows_faults_each_turn_not_the_run() -> None:
    with served_reference() as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "reference"})
        try:
            rows = drive(
                runtime,
                threads(),
                Sending(concurrency=2),
                books=Books(price=Price(input=1e308, output=1e308)),
            )
        finally:
            runtime.close()
    assert rows["error"].str.contains("usage_fault: ").all()
    assert rows["cost"].isna().all() and rows["surface"].notna().all()


@pytest.fixture
def priced_evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    evals = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals" / LANE, evals / LANE)
    monkeypatch.setenv(EVALS_ENV, str(evals))
    return evals


def test_the_json_of_a_run_priced_past_any_sum_is_json(
    priced_evals: Path, tmp_path: Path, history_root: Path
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", 2)
    with served_reference() as server:
        target = {
            "spec": f"openai:{server.base_url}",
            "options": {"model": "reference"},
            "price": {"input": 1e308, "output": 1e308},
        }
        (priced_evals / "runtimes.yaml").write_text(yaml.safe_dump({"targets": {"priced": target}}))
        result = CliRunner().invoke(
            app, ["run", "--runtime", "priced", "--lane", LANE, "--cases", str(cases), "--json"]
        )
    assert result.exit_code == 4, result.output  # every turn faulted: void, not a crash (3)
    (lane,) = strict_json(result.stdout)["lanes"]
    assert (
        lane["failure"] is None and lane["void"] and lane["metrics"]["cost"] is None
    )  # no finite cost to sum
    assert lane["metrics"]["turns_driven"] == 2 * TURNS_PER_THREAD
    assert all("usage_fault: " in fault["fault"] for fault in lane["faults"]), lane["faults"]
    assert sum(fault["turns"] for fault in lane["faults"]) == 2 * TURNS_PER_THREAD


@pytest.mark.parametrize("amount", ["inf", "1e999", "-inf", "nan"])
def test_a_max_cost_that_is_no_finite_amount_is_bad_input(amount: str, tmp_path: Path) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", 2)
    result = CliRunner().invoke(
        app, ["run", "--runtime", "reference", "--lane", LANE, "--cases", str(cases), "--max-cost", amount]
    )
    assert result.exit_code == 2, result.output
    assert "--max-cost" in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
