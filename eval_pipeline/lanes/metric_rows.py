"""Which verdicts a lane's rate counts, as its lane declares it: the one metric → predicate map.

A declared lane says it in ``lane.yaml`` (``no_dotted_inventory_rate: {rate: no_dotted_inventory}``,
``fabrication_rate: {failure_rate: no_fabrication}``); a lane kind says it in code
(``LaneKind.metric_rows``). Nothing reads a predicate off a metric's name: ``refusal_rate``
counts ``refused``. The failing-case tables of the checks, the paired comparison and the
regression check all take the rows from here. Counts and derived metrics (``all_of``) count no
rows; ``error_rate`` counts faulted turns (transcripts' ``error``), not predicate rows
(:data:`ERROR_RATE_ROWS`, which every lane has: :func:`rows_of_metric`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from eval_pipeline.lanes.declaration import MetricSpec
from eval_pipeline.metrics import ERROR_RATE


@dataclass(frozen=True)
class MetricRows:
    """The predicate rows one rate counts: of ``predicates`` (every predicate when None) and, when
    set, of ``severity`` only; it counts their passes, or their failures (``counts_failures``),
    over case rows or turn rows (``over``). ``source`` ``faults`` is the one rate that counts no
    predicate rows: the turns the runtime failed (``error_rate``)."""

    predicates: frozenset[str] | None
    severity: str | None = None
    counts_failures: bool = False
    over: Literal["cases", "turns"] = "cases"
    source: Literal["predicates", "faults"] = "predicates"

    def selects(self, rows: pd.DataFrame) -> pd.Series:
        """Which rows of a predicate table (``predicate``, and ``severity`` when set) the rate counts."""
        chosen = pd.Series(True, index=rows.index)
        if self.predicates is not None:
            chosen &= rows["predicate"].astype(str).isin(self.predicates)
        if self.severity is not None:
            chosen &= rows["severity"].astype(str).eq(self.severity)
        return chosen

    def describe(self) -> str:
        if self.source == "faults":
            return "faulted turns over turns"
        what = "failures" if self.counts_failures else "passes"
        of = ", ".join(sorted(self.predicates)) if self.predicates is not None else "every predicate"
        severity = f" ({self.severity})" if self.severity else ""
        return f"{what} of {of}{severity} over {self.over}"


# error_rate: per turn, a fault (transcripts' error set) is a failure; lower is better.
ERROR_RATE_ROWS = MetricRows(None, counts_failures=True, over="turns", source="faults")


def rows_of_metric(metric_rows: Mapping[str, MetricRows], metric: str) -> MetricRows | None:
    """The rows ``metric`` counts: the lane's declaration, or :data:`ERROR_RATE_ROWS` for
    ``error_rate`` (every lane emits it); None for a count, a derived or an undeclared metric."""
    if metric == ERROR_RATE:
        return metric_rows.get(metric, ERROR_RATE_ROWS)
    return metric_rows.get(metric)


def rows_of_declared(metrics: Mapping[str, MetricSpec]) -> dict[str, MetricRows]:
    """The rows each rate of a declaration counts, by metric name (a count or a derived metric
    counts none)."""
    return {
        name: MetricRows(
            frozenset({spec.predicate}), counts_failures=spec.failure_rate is not None, over=spec.over
        )
        for name, spec in metrics.items()
        if spec.predicate is not None
    }


def higher_is_better(rows: MetricRows | None, threshold_op: object = None, threshold: object = None) -> bool:
    """Which way is better for a metric: its threshold says (``>=``, ``<=``; ``== 1`` up, ``== 0``
    down), else what it counts (a failure rate: lower is better; a pass rate: higher)."""
    threshold_op = threshold_op if isinstance(threshold_op, str) else None
    if threshold_op in (">", ">="):
        return True
    if threshold_op in ("<", "<="):
        return False
    if threshold_op == "==" and isinstance(threshold, int | float) and not pd.isna(threshold):
        return float(threshold) != 0.0
    return not (rows is not None and rows.counts_failures)


def is_pinned(threshold_op: object, threshold: object) -> bool:
    """A threshold that allows no slack: ``== 1`` or ``== 0``."""
    return (
        isinstance(threshold_op, str)
        and threshold_op == "=="
        and isinstance(threshold, int | float)
        and not pd.isna(threshold)
        and float(threshold) in (0.0, 1.0)
    )
