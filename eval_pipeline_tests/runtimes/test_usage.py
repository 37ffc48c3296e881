"""Tokens, cost and time to first token per turn, and the usage metrics every lane run reports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval_pipeline.history import connect
from eval_pipeline.history.views import files_sql
from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.metrics.scoring import MetricValue
from eval_pipeline.metrics.usage import (
    USAGE_METRICS,
    Price,
    percentile,
    summed_usage,
    token_counts,
    totals_text,
    usage_metrics,
)
from eval_pipeline.run.drive import Books, Sending, drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.serve import usage as served_usage
from eval_pipeline.runtimes.targets import TargetsFileError, load_targets
from eval_pipeline.tables.columns import TRANSCRIPTS
from eval_pipeline_tests.runtimes.helpers import served_reference

PROMPTS = ("What is a river?", "What is a mountain?", "And a lake?")


def threads(cases: int = 4) -> list[Thread]:
    return [
        Thread(
            case_id=f"case_{i}",
            turns=tuple(TurnRequest(turn_index=t, role="turn", prompt=p) for t, p in enumerate(PROMPTS)),
        )
        for i in range(cases)
    ]


def test_a_price_gives_the_exact_cost_of_known_tokens() -> None:
    price = Price(input=3.0, output=15.0)
    assert price.cost(1_000_000, 0) == 3.0
    assert price.cost(200, 50) == (200 * 3.0 + 50 * 15.0) / 1_000_000
    assert price.cost(None, 10) is None and price.cost(10, None) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"usage": {"prompt_tokens": 12, "completion_tokens": 3}}, (12, 3)),
        ({"usage": {"prompt_tokens": 12}}, (12, None)),
        (
            {"usage": {"prompt_tokens": 12.0, "completion_tokens": None}},
            (12, None),
        ),  # a bad one: test_numbers
        ({"usage": None}, (None, None)),
        ({}, (None, None)),
    ],
)
def test_token_counts_are_whole_numbers_or_unknown(
    raw: dict[str, object], expected: tuple[object, ...]
) -> None:
    assert token_counts(raw) == expected


def _transcripts(**columns: list[object]) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    base: dict[str, list[object]] = {
        "error": [None] * n,
        "latency_ms": [None] * n,
        "ttft_ms": [None] * n,
        "prompt_tokens": [None] * n,
        "completion_tokens": [None] * n,
        "cost": [None] * n,
        "cached": [False] * n,
    }
    return pd.DataFrame({**base, **columns})


def test_usage_metrics_sum_only_what_every_answered_turn_said() -> None:
    told = _transcripts(
        prompt_tokens=[10, 20, None],
        completion_tokens=[1, 2, None],
        cost=[0.1, 0.2, None],
        error=[None, None, "TurnFault: HTTP 500"],  # a faulted turn counts no tokens
        latency_ms=[5.0, 7.0, 30.0],
        cached=[False, True, False],
    )
    values = {m.metric: m.value for m in usage_metrics(told)}
    assert list(values) == list(USAGE_METRICS)
    assert values["turns_driven"] == 3 and values["cached_turns"] == 1
    assert (values["prompt_tokens"], values["completion_tokens"]) == (30, 3)
    assert values["cost"] == math.fsum([0.1, 0.2])
    assert values["latency_p50_ms"] == 7.0 and values["latency_p99_ms"] == 30.0
    assert values["ttft_p50_ms"] is None  # nothing streamed: missing, never 0

    untold = _transcripts(prompt_tokens=[10, None], completion_tokens=[1, None], cost=[0.1, None])
    values = {m.metric: m.value for m in usage_metrics(untold)}
    assert values["prompt_tokens"] is None and values["cost"] is None  # a partial sum would be too low
    assert values["latency_p50_ms"] is None


def test_percentiles_are_nearest_rank() -> None:
    column = pd.Series([float(v) for v in range(1, 101)])
    assert [percentile(column, q) for q in (50, 95, 99)] == [50.0, 95.0, 99.0]
    assert percentile(pd.Series([None, 4.0], dtype="Float64"), 99) == 4.0
    assert percentile(pd.Series([], dtype="float64"), 50) is None


def test_the_cli_totals_add_up_and_say_what_is_unknown() -> None:
    one = {
        "turns_driven": 4.0,
        "cached_turns": 1.0,
        "prompt_tokens": 100.0,
        "completion_tokens": 10.0,
        "cost": 0.5,
    }
    other = {**one, "prompt_tokens": None}
    assert totals_text(summed_usage([one, one])) == "8 turns (2 from the cache), 200 + 20 tokens, cost 1"
    assert totals_text(summed_usage([one, other])).startswith("8 turns (2 from the cache), n/a + 20 tokens")


@pytest.mark.parametrize("stream", [False, True])
def test_tokens_cost_and_ttft_come_from_a_real_server(stream: bool) -> None:
    price = Price(input=2.5, output=10.0)
    with served_reference() as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "reference", "stream": stream})
        try:
            transcripts = drive(runtime, threads(), Sending(concurrency=4), books=Books(price=price))
        finally:
            runtime.close()
    assert transcripts["error"].isna().all()
    # The server counts words: what it said for each turn is what the turn records.
    for case_id, rows in transcripts.groupby("case_id"):
        for index, row in enumerate(rows.itertuples()):
            said = json.loads(row.raw)["usage"]
            assert (row.prompt_tokens, row.completion_tokens) == (
                said["prompt_tokens"],
                said["completion_tokens"],
            )
            asked = served_usage_of(list(PROMPTS[: index + 1]), row.surface)
            assert (row.prompt_tokens, row.completion_tokens) == asked, case_id
            assert row.cost == price.cost(row.prompt_tokens, row.completion_tokens)
    assert not transcripts["cached"].any()
    assert transcripts["ttft_ms"].notna().all() == stream and transcripts["ttft_ms"].isna().all() != stream
    values = {m.metric: m.value for m in usage_metrics(transcripts)}
    prompt, completion = int(transcripts["prompt_tokens"].sum()), int(transcripts["completion_tokens"].sum())
    assert (values["prompt_tokens"], values["completion_tokens"]) == (prompt, completion)
    assert values["cost"] == pytest.approx((prompt * 2.5 + completion * 10.0) / 1e6, rel=1e-12)
    assert values["cost"] == math.fsum(transcripts["cost"].tolist())
    assert (values["ttft_p50_ms"] is not None) == stream


def served_usage_of(prompts: list[str], surface: str) -> tuple[int, int]:
    from eval_pipeline.runtimes.base import TurnResponse

    said = served_usage(TurnResponse(surface=surface), prompts)
    return said["prompt_tokens"], said["completion_tokens"]


def test_a_target_declares_its_price_and_cache(tmp_path: Path) -> None:
    path = tmp_path / "runtimes.yaml"
    path.write_text(
        "targets:\n"
        "  gw:\n"
        "    spec: openai:http://127.0.0.1:9/v1\n"
        "    options: {model: m}\n"
        "    cache: true\n"
        "    price: {input: 3, output: 15.5}\n",
        encoding="utf-8",
    )
    target = load_targets(path)["gw"]
    assert target.cache and target.price == Price(input=3.0, output=15.5)


def test_a_bad_price_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "runtimes.yaml"
    path.write_text(
        "targets:\n  gw:\n    spec: reference\n    price:\n      input: -1\n      output: 2\n      extra: 1\n",
        encoding="utf-8",
    )
    with pytest.raises(TargetsFileError) as raised:
        load_targets(path)
    problems = {(p.line, p.field) for p in raised.value.problems}
    assert (5, "targets.gw.price.input") in problems and (7, "targets.gw.price.extra") in problems


def test_old_history_without_the_usage_columns_still_reads(history_root: Path) -> None:
    """A transcripts file written before the usage columns existed reads with them null."""
    old = pa.schema([f for f in TRANSCRIPTS if f.name not in USAGE_COLUMNS_ADDED])
    rows = {name: [None] for name in old.names}
    rows.update(
        run_id=["r1"], lane=["l"], split=["dev"], runtime=["reference"], case_set=["dev"], case_id=["c"]
    )
    rows.update(turn_index=[0], attempts=[1], sample_index=[0], surface=["hello"])
    folder = history_root / "transcripts" / "date=2026-01-01"
    folder.mkdir(parents=True)
    pq.write_table(pa.table(rows, schema=old), folder / "r1.parquet")
    con = connect(str(history_root))
    try:
        read = con.execute(
            "SELECT surface, prompt_tokens, completion_tokens, cost, cached, ttft_ms FROM "
            f"({files_sql(str(history_root), 'transcripts')})"
        ).fetchall()
    finally:
        con.close()
    assert read == [("hello", None, None, None, None, None)]


USAGE_COLUMNS_ADDED = ("prompt_tokens", "completion_tokens", "cost", "cached", "ttft_ms")


def test_usage_metric_values_are_informational() -> None:
    """Usage carries no threshold: judging a lane's thresholds never reads it."""
    from eval_pipeline.metrics.scoring import judge

    assert judge([], [MetricValue("latency_p99_ms", 1e9), MetricValue("error_rate", 0.0, 0.0, 1.0)]) == []
