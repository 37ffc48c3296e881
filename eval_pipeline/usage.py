"""What a run used: tokens per turn, their price, and the run's usage metrics.

A turn's ``prompt_tokens`` and ``completion_tokens`` are what the runtime said in its reply's
``usage`` (null when it said nothing); a target's ``price`` (per million input and output
tokens) turns them into the turn's ``cost``. Every lane run then reports the same usage
metrics, whatever its kind (:data:`USAGE_METRICS`): turns driven, tokens, cost, the turns
answered from the response cache, latency p50 / p95 / p99 and time to first token p50 / p95.
They carry no threshold unless a lane declares one, so they never change a lane's verdict.

A sum is reported only when every answered turn said its part: a total over the turns that
happened to report would read as the run's and be too low, so it is missing instead. A
percentile is over the turns that were timed (a turn answered from the cache or a recording
was not); with none it is missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.durations import format_duration
from eval_pipeline.scoring import MetricValue

TURNS_DRIVEN = "turns_driven"
PROMPT_TOKENS = "prompt_tokens"
COMPLETION_TOKENS = "completion_tokens"
COST = "cost"
CACHED_TURNS = "cached_turns"
LATENCY_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("latency_p50_ms", 50.0),
    ("latency_p95_ms", 95.0),
    ("latency_p99_ms", 99.0),
)
TTFT_PERCENTILES: tuple[tuple[str, float], ...] = (("ttft_p50_ms", 50.0), ("ttft_p95_ms", 95.0))

# Every usage metric, in the order a run reports them.
USAGE_METRICS: tuple[str, ...] = (
    TURNS_DRIVEN,
    PROMPT_TOKENS,
    COMPLETION_TOKENS,
    COST,
    CACHED_TURNS,
    *(name for name, _ in LATENCY_PERCENTILES),
    *(name for name, _ in TTFT_PERCENTILES),
)

# The usage metrics that time the runtime: two runs of the same answers differ in them, and a
# recording (nothing sent) has none.
TIMED_METRICS: tuple[str, ...] = tuple(name for name, _ in (*LATENCY_PERCENTILES, *TTFT_PERCENTILES))

# The transcript columns the usage metrics read.
USAGE_COLUMNS: tuple[str, ...] = (
    "error",
    "latency_ms",
    "ttft_ms",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "cached",
)

TOKENS_PER_PRICE_UNIT = 1_000_000


class Price(BaseModel):
    """What a target charges, per million tokens: ``input`` (prompt) and ``output`` (completion)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    input: float = Field(ge=0.0, allow_inf_nan=False, description="Price of a million prompt tokens.")
    output: float = Field(ge=0.0, allow_inf_nan=False, description="Price of a million completion tokens.")

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """The price of one turn's tokens; None when the runtime did not say either count."""
        if prompt_tokens is None or completion_tokens is None:
            return None
        return (prompt_tokens * self.input + completion_tokens * self.output) / TOKENS_PER_PRICE_UNIT


def token_counts(raw: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(prompt tokens, completion tokens) from a reply's ``usage`` in ``raw``; None for a count
    it does not give as a whole number >= 0."""
    usage = raw.get("usage")
    if not isinstance(usage, Mapping):
        return None, None
    return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def first_token_ms(raw: Mapping[str, Any]) -> float | None:
    """Milliseconds to the first token, when the runtime measured it (a streamed reply)."""
    value = raw.get("ttft_ms")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class TurnUsage:
    """The usage columns of one answered turn."""

    prompt_tokens: int | None
    completion_tokens: int | None
    ttft_ms: float | None


def turn_usage(raw: Mapping[str, Any]) -> TurnUsage:
    """What a reply's ``raw`` says of its usage."""
    prompt, completion = token_counts(raw)
    return TurnUsage(prompt, completion, first_token_ms(raw))


def usage_metrics(transcripts: pd.DataFrame) -> list[MetricValue]:
    """The run's :data:`USAGE_METRICS` from its transcripts (at least :data:`USAGE_COLUMNS`, every sample)."""
    answered = transcripts[transcripts["error"].isna()]
    cached = transcripts["cached"].astype("boolean").fillna(False)
    values = [
        MetricValue(TURNS_DRIVEN, float(len(transcripts))),
        MetricValue(PROMPT_TOKENS, whole_sum(answered["prompt_tokens"])),
        MetricValue(COMPLETION_TOKENS, whole_sum(answered["completion_tokens"])),
        MetricValue(COST, whole_sum(answered["cost"])),
        MetricValue(CACHED_TURNS, float(cached.sum())),
    ]
    values += [MetricValue(name, percentile(transcripts["latency_ms"], q)) for name, q in LATENCY_PERCENTILES]
    values += [MetricValue(name, percentile(transcripts["ttft_ms"], q)) for name, q in TTFT_PERCENTILES]
    return values


def whole_sum(column: pd.Series) -> float | None:
    """The sum of ``column`` when every value is known (and there is one), else None."""
    if column.empty or column.isna().any():
        return None
    return math.fsum(column.astype("float64").tolist())  # exact to the last bit, whatever the order


def percentile(column: pd.Series, q: float) -> float | None:
    """The ``q``-th percentile (nearest rank) of the known values of ``column``; None with none."""
    known = column.dropna().to_numpy(dtype="float64")
    if not len(known):
        return None
    return float(np.percentile(known, q, method="inverted_cdf"))


# What a run's usage line adds up over several lane runs (a percentile does not add up).
SUMMED_METRICS: tuple[str, ...] = (TURNS_DRIVEN, CACHED_TURNS, PROMPT_TOKENS, COMPLETION_TOKENS, COST)


def summed_usage(runs: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """The :data:`SUMMED_METRICS` of several runs' usage added up; a sum one run could not say is missing."""
    totals: dict[str, float | None] = {}
    for name in SUMMED_METRICS:
        values = [run.get(name) for run in runs]
        totals[name] = (
            None
            if not values or any(v is None for v in values)
            else math.fsum(v for v in values if v is not None)
        )
    return totals


def _amount(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    text = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"
    return f"{text}{unit}"


def _duration(ms: float | None) -> str:
    return "n/a" if ms is None else format_duration(ms)


def _cost(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def totals_text(usage: Mapping[str, float | None]) -> str:
    """Turns (and those from the cache), tokens and cost, in words: ``120 turns (40 from the
    cache), 3,400 + 1,200 tokens, cost 0.0123``."""
    return (
        f"{_amount(usage.get(TURNS_DRIVEN))} turns ({_amount(usage.get(CACHED_TURNS))} from the cache), "
        f"{_amount(usage.get(PROMPT_TOKENS))} + {_amount(usage.get(COMPLETION_TOKENS))} tokens, "
        f"cost {_cost(usage.get(COST))}"
    )


def timing_text(usage: Mapping[str, float | None]) -> str:
    """One lane run's latency p50 / p95 / p99 and TTFT p50 / p95, in words."""
    latency = " / ".join(_duration(usage.get(name)) for name, _ in LATENCY_PERCENTILES)
    ttft = " / ".join(_duration(usage.get(name)) for name, _ in TTFT_PERCENTILES)
    return f"latency p50/p95/p99 {latency}; TTFT p50/p95 {ttft}"
