"""Tables → metrics → threshold outcomes. Pure functions, no Dagster."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import pandas as pd

ThresholdOp = Literal[">=", "<=", "==", ">", "<"]
# The one severity vocabulary: a threshold check blocks (ERROR) or reports (WARN).
Severity = Literal["ERROR", "WARN"]
# A case row's severity, in the spelling EvalCase v1 files use (seed 004 §4) and the
# case_predicates tables keep: "hard" rows are what blocking (ERROR) thresholds gate, "report"
# rows are what WARN thresholds watch. Every lane's case rows use this one alias.
CaseSeverity = Literal["hard", "report"]

_OPS: Mapping[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}


@dataclass(frozen=True)
class MetricValue:
    """One lane metric. ``value`` is None when it cannot be computed (empty denominator)."""

    metric: str
    value: float | None
    numerator: float | None = None
    denominator: float | None = None
    # Case ids that count against the metric, shown in check metadata.
    failing_case_ids: tuple[str, ...] = ()


def rate(metric: str, verdicts: Iterable[tuple[str, bool | None]]) -> MetricValue:
    """Passed / applicable over ``(case_id, verdict)`` pairs; ``None`` verdicts are not applicable.

    An empty denominator gives ``value=None``: a metric that cannot be computed is missing,
    never 1.0.
    """
    applicable = [(case_id, bool(v)) for case_id, v in verdicts if v is not None and not pd.isna(v)]
    passed = sum(1 for _, v in applicable if v)
    failing = tuple(sorted({case_id for case_id, v in applicable if not v}))
    if not applicable:
        return MetricValue(metric, None, 0.0, 0.0)
    return MetricValue(metric, passed / len(applicable), float(passed), float(len(applicable)), failing)


def count(metric: str, n: int) -> MetricValue:
    """A plain count (cases, turns): value only."""
    return MetricValue(metric, float(n))


def predicate_rate(metric: str, table: pd.DataFrame, predicate: str, *, key: str = "case_id") -> MetricValue:
    """Rate of one predicate over a long predicate table (turn_ or case_predicates)."""
    rows = table[table["predicate"] == predicate]
    return rate(metric, zip(rows[key].astype(str), rows["passed"], strict=True))


def compare(value: float | None, op: str, threshold: float) -> bool:
    """Whether ``value op threshold`` holds. A missing value never satisfies a threshold."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if op == "==":
        return math.isclose(value, threshold, rel_tol=0.0, abs_tol=1e-9)
    return _OPS[op](value, threshold)


def metric_index(metrics: Sequence[MetricValue]) -> dict[str, MetricValue]:
    """Metrics by name; a lane emitting one name twice is a programming error."""
    index: dict[str, MetricValue] = {}
    for m in metrics:
        if m.metric in index:
            raise ValueError(f"metric {m.metric!r} emitted twice")
        index[m.metric] = m
    return index


class Threshold(Protocol):
    """What judging needs of a threshold (``lanes.spec.ThresholdSpec`` is one)."""

    @property
    def metric(self) -> str: ...
    @property
    def op(self) -> ThresholdOp: ...
    @property
    def value(self) -> float: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def reason(self) -> str: ...


@dataclass(frozen=True)
class ThresholdVerdict:
    """One threshold judged against one run's metric: computed once, rendered everywhere
    (the metrics table's ``passed`` column, the asset check, the CLI)."""

    threshold: Threshold
    metric: MetricValue
    passed: bool

    @property
    def bound(self) -> str:
        return f"{self.threshold.op} {self.threshold.value:g}"


def judge(thresholds: Sequence[Threshold], metrics: Sequence[MetricValue]) -> list[ThresholdVerdict]:
    """Every threshold's verdict; a threshold naming a metric the lane did not emit is an error."""
    index = metric_index(metrics)
    missing = sorted({t.metric for t in thresholds} - set(index))
    if missing:
        raise ValueError(f"thresholds name metrics the lane does not emit: {missing}")
    return [
        ThresholdVerdict(t, index[t.metric], compare(index[t.metric].value, t.op, t.value))
        for t in thresholds
    ]
