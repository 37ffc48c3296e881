"""What a run used: tokens per turn, their price, and the run's usage metrics.

A turn's ``prompt_tokens`` and ``completion_tokens`` are what the runtime said in its reply's
``usage`` (null when it said nothing); a target's ``price`` (per million input and output
tokens) turns them into the turn's ``cost``. Every lane run then reports the same usage
metrics, whatever its kind (:data:`USAGE_METRICS`): turns driven, tokens, cost, the turns
answered from the response cache, the turns cut at the token limit, the turns retried after a
transient fault (sent more than once), latency p50 / p95 / p99,
time to first token p50 / p95 and the generation rate of streamed answers.
They carry no threshold unless a lane declares one, so they never change a lane's verdict.

A token count is a whole number from 0 to :data:`MAX_TOKEN_COUNT` and a cost is finite; a
reply whose usage says otherwise (``prompt_tokens: 1e29``, a negative count, text), or whose
tokens at the target's price come to no finite cost, is that turn's fault (``usage_fault``),
never a number that overflows a column or a sum later.

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

from eval_pipeline.core import TOKEN_LIMIT, duration_text
from eval_pipeline.metrics.scoring import MetricValue, number_text

TURNS_DRIVEN = "turns_driven"
PROMPT_TOKENS = "prompt_tokens"
COMPLETION_TOKENS = "completion_tokens"
COST = "cost"
CACHED_TURNS = "cached_turns"
TRUNCATED_TURNS = "truncated_turns"
RETRIED_TURNS = "retried_turns"  # turns sent more than once: a transient fault was retried
LATENCY_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("latency_p50_ms", 50.0),
    ("latency_p95_ms", 95.0),
    ("latency_p99_ms", 99.0),
)
TTFT_PERCENTILES: tuple[tuple[str, float], ...] = (("ttft_p50_ms", 50.0), ("ttft_p95_ms", 95.0))
# The median rate a streamed answer was generated at, after its first token: unlike latency and
# TTFT, which include any wait at the server (a one-slot server queues a run's own requests),
# it measures the model alone.
GENERATION_RATE = "generation_tokens_per_s_p50"

# Every usage metric, in the order a run reports them.
USAGE_METRICS: tuple[str, ...] = (
    TURNS_DRIVEN,
    PROMPT_TOKENS,
    COMPLETION_TOKENS,
    COST,
    CACHED_TURNS,
    TRUNCATED_TURNS,
    RETRIED_TURNS,
    *(name for name, _ in LATENCY_PERCENTILES),
    *(name for name, _ in TTFT_PERCENTILES),
    GENERATION_RATE,
)

# The usage metrics that are durations, in milliseconds (shown by core.durations.duration_text).
DURATION_METRICS: tuple[str, ...] = tuple(name for name, _ in (*LATENCY_PERCENTILES, *TTFT_PERCENTILES))

# The usage metrics that time the runtime: two runs of the same answers differ in them, and a
# recording (nothing sent) has none.
TIMED_METRICS: tuple[str, ...] = (*DURATION_METRICS, GENERATION_RATE)

# The transcript columns the usage metrics read.
USAGE_COLUMNS: tuple[str, ...] = (
    "error",
    "latency_ms",
    "ttft_ms",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "cached",
    "finish_reason",
    "attempts",
)

TOKENS_PER_PRICE_UNIT = 1_000_000
# The largest token count a turn may report: a float64 holds every count up to it exactly, so
# sums and costs computed in floats neither round it nor overflow.
MAX_TOKEN_COUNT = 2**53 - 1


class UsageFault(ValueError):
    """A reply's usage that cannot be a turn's: a token count that is not a whole number in
    range, or tokens whose cost at the target's price is not finite. The driver records it as
    the turn's fault (its ``error``), the answer kept."""

    def __init__(self, message: str) -> None:
        super().__init__(f"usage_fault: {message}")


class Price(BaseModel):
    """What a target charges, per million tokens: ``input`` (prompt) and ``output`` (completion)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    input: float = Field(ge=0.0, allow_inf_nan=False, description="Price of a million prompt tokens.")
    output: float = Field(ge=0.0, allow_inf_nan=False, description="Price of a million completion tokens.")

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """The price of one turn's tokens; None when the runtime did not say either count.
        UsageFault when it is not a finite amount."""
        if prompt_tokens is None or completion_tokens is None:
            return None
        cost = (prompt_tokens * self.input + completion_tokens * self.output) / TOKENS_PER_PRICE_UNIT
        if not math.isfinite(cost):
            raise UsageFault(
                f"{prompt_tokens:,} + {completion_tokens:,} tokens at {self.input:g} / {self.output:g} "
                "per million cost more than a number can hold"
            )
        return cost


def token_counts(raw: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(prompt tokens, completion tokens) from a reply's ``usage`` in ``raw``; None for a count
    it does not give. UsageFault for a count that is not a whole number from 0 to
    :data:`MAX_TOKEN_COUNT` (a JSON number with no fraction, ``12.0``, is a whole number)."""
    usage = raw.get("usage")
    if not isinstance(usage, Mapping):
        return None, None
    return _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")


def _count(usage: Mapping[str, Any], name: str) -> int | None:
    value = usage.get(name)
    if value is None:
        return None
    whole = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer()
    )
    if not whole or not 0 <= value <= MAX_TOKEN_COUNT:
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
        raise UsageFault(
            f"{name} is {shown}, not a token count (a whole number from 0 to {MAX_TOKEN_COUNT:,})"
        )
    return int(value)


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
        MetricValue(TRUNCATED_TURNS, float(truncated(transcripts).sum())),
        MetricValue(RETRIED_TURNS, float(retried(transcripts).sum())),
    ]
    values += [MetricValue(name, percentile(transcripts["latency_ms"], q)) for name, q in LATENCY_PERCENTILES]
    values += [MetricValue(name, percentile(transcripts["ttft_ms"], q)) for name, q in TTFT_PERCENTILES]
    values.append(MetricValue(GENERATION_RATE, percentile(generation_rates(answered), 50.0)))
    return values


def generation_rates(transcripts: pd.DataFrame) -> pd.Series:
    """Each streamed turn's tokens per second after its first token: the completion tokens but
    the first over the time from the first token to the last (null where a turn was not
    streamed, said no token count, or had no time or token after its first)."""
    completion = transcripts["completion_tokens"].astype("Float64")
    after_first_s = (
        transcripts["latency_ms"].astype("Float64") - transcripts["ttft_ms"].astype("Float64")
    ) / 1000.0
    usable = (completion > 1) & (after_first_s > 0)
    return ((completion - 1) / after_first_s).where(usable.fillna(False))


def truncated(transcripts: pd.DataFrame) -> pd.Series:
    """Whether each turn was cut at the token limit (its ``finish_reason`` is ``length``)."""
    if "finish_reason" not in transcripts.columns:  # a stage file written before the column
        return pd.Series(False, index=transcripts.index)
    return transcripts["finish_reason"].astype("string").eq(TOKEN_LIMIT).fillna(False).astype(bool)


def was_retried(attempts: object) -> bool:
    """Whether a turn of ``attempts`` calls was retried: sent more than once after a transient fault."""
    return isinstance(attempts, int | float) and not isinstance(attempts, bool) and attempts > 1


def retried(transcripts: pd.DataFrame) -> pd.Series:
    """Whether each turn was retried (:func:`was_retried` of its ``attempts``)."""
    if "attempts" not in transcripts.columns:  # a stage file written without the column
        return pd.Series(False, index=transcripts.index)
    attempts = transcripts["attempts"].astype("Float64")
    return (attempts > 1).fillna(False).astype(bool)  # was_retried of each known count, at once


def whole_sum(column: pd.Series) -> float | None:
    """The sum of ``column`` when every value is known (and there is one), else None."""
    if column.empty or column.isna().any():
        return None
    try:
        total = math.fsum(column.astype("float64").tolist())  # exact to the last bit, whatever the order
    except OverflowError:  # finite values whose sum is not
        return None
    return total if math.isfinite(total) else None


def percentile(column: pd.Series, q: float) -> float | None:
    """The ``q``-th percentile (nearest rank) of the known values of ``column``; None with none."""
    known = column.dropna().to_numpy(dtype="float64")
    if not len(known):
        return None
    return float(np.percentile(known, q, method="inverted_cdf"))


# What a run's usage line adds up over several lane runs (a percentile does not add up).
SUMMED_METRICS: tuple[str, ...] = (
    TURNS_DRIVEN,
    CACHED_TURNS,
    TRUNCATED_TURNS,
    RETRIED_TURNS,
    PROMPT_TOKENS,
    COMPLETION_TOKENS,
    COST,
)


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


def _cost(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def totals_text(usage: Mapping[str, float | None]) -> str:
    """Turns (and those from the cache, and those cut at the token limit or retried when there
    are any), tokens and cost, in words: ``120 turns (40 from the cache, 13 cut at the token
    limit, 26 retried), 3,400 + 1,200 tokens, cost 0.0123``."""
    cut = usage.get(TRUNCATED_TURNS)
    cut_text = f", {_amount(cut)} cut at the token limit" if cut else ""
    again = usage.get(RETRIED_TURNS)
    retried_text = f", {_amount(again)} retried" if again else ""
    return (
        f"{_amount(usage.get(TURNS_DRIVEN))} turns ({_amount(usage.get(CACHED_TURNS))} from the cache"
        f"{cut_text}{retried_text}), {_amount(usage.get(PROMPT_TOKENS))} + "
        f"{_amount(usage.get(COMPLETION_TOKENS))} tokens, cost {_cost(usage.get(COST))}"
    )


def usage_value_text(metric: str, value: float | None) -> str:
    """One usage metric's value as it is shown: a duration as ``850 ms`` / ``28.5 s``
    (:func:`eval_pipeline.core.durations.duration_text`), any other as a number."""
    if metric in DURATION_METRICS:
        return duration_text(value)
    return "n/a" if value is None else number_text(value)


def timing_text(usage: Mapping[str, float | None], in_flight: int = 1) -> str:
    """One lane run's latency p50 / p95 / p99, TTFT p50 / p95 and, when streamed answers
    measured it, their generation rate, in words; with more than one session ``in_flight`` at
    once, what the latencies include (a turn is timed from send to answer, so a server that
    answers fewer at once makes the run's own turns wait, and the wait counts)."""
    latency = " / ".join(duration_text(usage.get(name)) for name, _ in LATENCY_PERCENTILES)
    ttft = " / ".join(duration_text(usage.get(name)) for name, _ in TTFT_PERCENTILES)
    rate = usage.get(GENERATION_RATE)
    generated = "" if rate is None else f"; {rate:.1f} tokens/s"
    queued = (
        "" if in_flight <= 1 else f" (send to answer, up to {in_flight} sessions at once: includes any queue)"
    )
    return f"latency p50/p95/p99 {latency}{queued}; TTFT p50/p95 {ttft}{generated}"
