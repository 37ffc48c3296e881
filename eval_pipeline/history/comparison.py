"""Is run B different from run A? Per metric, the paired figures on the cases both measured,
and the cases that flipped, once each: what ``eval-pipeline compare`` prints and a viewer shows.

:func:`compare_runs` is the one call: two committed runs and the lane's metric rows
(:mod:`eval_pipeline.lanes.metric_rows`) in, a :class:`RunComparison` out, whose
:meth:`RunComparison.document` is plain data (JSON-ready dicts and lists) carrying every figure.

Per rate over cases, from each run's case verdicts (:mod:`eval_pipeline.history.verdicts`) on
the cases both runs evaluated and both had a verdict for: the rate on each side, the delta
``B − A``, its 95% paired bootstrap interval (whole cases resampled, fixed seed) and, when
each case holds one verdict per side, the 2×2 counts and the exact McNemar p-value. A rate
over turns (and ``error_rate``) pairs the turns both runs judged (:mod:`eval_pipeline.history.pairs`:
same case, sample and turn). With several verdicts per case (repeats, turns) they are
clustered and McNemar does not apply: the bootstrap resamples whole cases and gives the
p-value too (:func:`eval_pipeline.metrics.paired.bootstrap_p_value`). Across the lane's metrics
the p-values are Holm-adjusted and the verdict reads the adjusted one. A run whose history
holds no turn verdicts (written before they were kept) or no transcripts leaves its rates
over turns not tested, and says which run. Counts and derived metrics are shown, not tested.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from eval_pipeline.history.diff import CaseOverlap, case_overlap, metric_sides, same_cases
from eval_pipeline.history.pairs import (
    holds_run,
    missing_turns_note,
    paired_turns,
    per_case_counts,
    turn_source,
)
from eval_pipeline.history.runs import RunRef, is_missing
from eval_pipeline.history.verdicts import flip_rows, side_by_side
from eval_pipeline.lanes import declared_lane, lane_kind
from eval_pipeline.lanes.metric_rows import MetricRows, higher_is_better, rows_of_metric
from eval_pipeline.metrics import ALPHA, RESAMPLES, SEED, PairedFigures, holm, paired_figures, verdict_words

# Why a metric is not tested (its verdict and method say so).
NOT_A_RATE = "not tested: not a rate"
NOT_DECLARED = "not tested: rows not declared"
NO_COMMON_VERDICT = "not tested: no common case"
MCNEMAR = "exact McNemar"
CLUSTERED = "clustered: bootstrap over cases"  # several verdicts per case: McNemar does not apply


@dataclass(frozen=True)
class MetricComparison:
    """One metric of both runs: each run's stored value, and the paired test when it applies."""

    metric: str
    value_a: float | None  # the runs' own metric values (each over its own cases)
    value_b: float | None
    numerator_a: float | None
    denominator_a: float | None
    numerator_b: float | None
    denominator_b: float | None
    delta: float | None  # value_b - value_a; null when the case sets differ
    higher_is_better: bool
    over: str | None  # what the rate's verdicts are of: cases or turns (None: not a rate)
    method: str  # MCNEMAR, CLUSTERED, or why it is not tested (NOT_A_RATE, …)
    paired: PairedFigures | None  # on the common cases; None when not tested
    p_holm: float | None
    verdict: str
    threshold_op: str | None
    threshold: float | None
    severity: str | None
    passed_a: bool | None
    passed_b: bool | None


@dataclass(frozen=True)
class RunComparison:
    """Run ``a`` against run ``b``: per-metric figures and the flipped case predicates."""

    a: RunRef
    b: RunRef
    metrics: tuple[MetricComparison, ...]
    flips: pd.DataFrame  # verdicts.FLIP_COLUMNS, pass→fail first, each case predicate once
    note: str | None  # set when the runs' case sets differ: compared on the common cases
    overlap: CaseOverlap
    alpha: float
    resamples: int
    seed: int

    def document(self) -> dict[str, Any]:
        """Every figure as plain data (what ``compare --json`` prints)."""
        return {
            "lane": self.b.lane,
            "split": self.b.split,
            "case_set": self.b.case_set,
            "a": run_document(self.a),
            "b": run_document(self.b),
            "note": self.note,
            "common_cases": self.overlap.common,
            "alpha": self.alpha,
            "correction": "holm",
            "resamples": self.resamples,
            "seed": self.seed,
            "metrics": [metric_document(m) for m in self.metrics],
            "flips": plain_records(self.flips),
        }


def compare_runs(
    con: duckdb.DuckDBPyConnection,
    a: RunRef,
    b: RunRef,
    metric_rows: Mapping[str, MetricRows],
    *,
    alpha: float = ALPHA,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    surfaces: bool = True,
) -> RunComparison:
    """Run ``a`` against run ``b`` (module docstring); ``metric_rows`` is the lane's declaration
    (empty for a lane this checkout does not declare: nothing is then tested)."""
    overlap = case_overlap(con, a, b)
    note = overlap.note(a, b)
    stored = metric_sides(con, a, b)
    declared = [rows_of_metric(metric_rows, str(row["metric"])) for _, row in stored.iterrows()]
    with side_by_side(con, a, b) as sides:
        flips = flip_rows(con, a, b, sides, common_cases_only=not same_cases(a, b), surfaces=surfaces)
        tested = [
            _tested(con, a, b, row, rows, sides, resamples, seed)
            for (_, row), rows in zip(stored.iterrows(), declared, strict=True)
        ]
    adjusted = holm([figures.p_value if figures else None for figures, _ in tested])
    metrics = tuple(
        _metric(row, figures, method, p_holm, rows, alpha, note is None)
        for (_, row), (figures, method), p_holm, rows in zip(
            stored.iterrows(), tested, adjusted, declared, strict=True
        )
    )
    return RunComparison(a, b, metrics, flips, note, overlap, alpha, resamples, seed)


def compare_as_declared(con: duckdb.DuckDBPyConnection, a: RunRef, b: RunRef) -> tuple[RunComparison, bool]:
    """:func:`compare_runs` with the lane's metric rows and regression alpha as this checkout
    declares it (what ``eval-pipeline compare`` and the viewer's compare page show), and whether
    it declares the lane at all (when not, nothing is tested)."""
    spec = declared_lane(a.lane)
    rows = lane_kind(spec).metric_rows if spec else {}
    return compare_runs(con, a, b, rows, alpha=spec.regression_alpha if spec else ALPHA), spec is not None


def _tested(
    con: duckdb.DuckDBPyConnection,
    a: RunRef,
    b: RunRef,
    row: pd.Series,
    rows: MetricRows | None,
    sides: str,
    resamples: int,
    seed: int,
) -> tuple[PairedFigures | None, str]:
    if rows is None:
        counted = not is_missing(row["denominator_a"]) or not is_missing(row["denominator_b"])
        return None, NOT_DECLARED if counted else NOT_A_RATE
    if rows.over == "turns":
        table = turn_source(rows)
        lacking = next((ref for ref in (a, b) if not holds_run(con, table, ref)), None)
        if lacking is not None:
            return None, missing_turns_note(table, lacking.run_id)
        counts = paired_turns(con, a, b, rows).counts
    else:
        counts = per_case_counts(con, sides, rows)
    figures = paired_figures(*counts.arrays(), resamples=resamples, seed=seed)
    if figures is None:
        return None, NO_COMMON_VERDICT
    return figures, CLUSTERED if figures.clustered else MCNEMAR


def _metric(
    row: pd.Series,
    figures: PairedFigures | None,
    method: str,
    p_holm: float | None,
    rows: MetricRows | None,
    alpha: float,
    same: bool,
) -> MetricComparison:
    op, threshold = _text(row["threshold_op"]), _number(row["threshold"])
    better_up = higher_is_better(rows, op, threshold)
    verdict = verdict_words(figures, p_holm, higher_is_better=better_up, alpha=alpha) if figures else method
    return MetricComparison(
        metric=str(row["metric"]),
        value_a=_number(row["value_a"]),
        value_b=_number(row["value_b"]),
        numerator_a=_number(row["numerator_a"]),
        denominator_a=_number(row["denominator_a"]),
        numerator_b=_number(row["numerator_b"]),
        denominator_b=_number(row["denominator_b"]),
        delta=_number(row["delta"]) if same else None,
        higher_is_better=better_up,
        over=None if rows is None else rows.over,
        method=method,
        paired=figures,
        p_holm=p_holm,
        verdict=verdict,
        threshold_op=op,
        threshold=threshold,
        severity=_text(row["severity"]),
        passed_a=None if is_missing(row["passed_a"]) else bool(row["passed_a"]),
        passed_b=None if is_missing(row["passed_b"]) else bool(row["passed_b"]),
    )


def run_document(ref: RunRef) -> dict[str, Any]:
    return {
        "runtime": ref.runtime,
        "run_id": ref.run_id,
        "date": ref.date.isoformat() if ref.date else None,
        "case_set": ref.case_set,
        "cases_sha256": ref.cases_sha256,
        "label": ref.label(),
    }


def metric_document(metric: MetricComparison) -> dict[str, Any]:
    """One metric's figures as plain data: the paired figures flattened (null when not tested)."""
    record = {k: v for k, v in asdict(metric).items() if k != "paired"}
    figures = metric.paired
    counts = figures.counts if figures else None
    record.update({key: getattr(figures, name) if figures else None for key, name in _PAIRED_KEYS})
    record.update({name: getattr(counts, name) if counts else None for name in _COUNT_KEYS})
    return record


# A metric document's keys for the paired figures (key, attribute of PairedFigures), then those
# of the 2×2 counts (attributes of the same name).
_PAIRED_KEYS: tuple[tuple[str, str], ...] = (
    ("cases", "cases"),
    ("verdicts_a", "verdicts_a"),
    ("verdicts_b", "verdicts_b"),
    ("rate_a", "rate_a"),
    ("rate_b", "rate_b"),
    ("paired_delta", "delta"),
    ("ci_low", "ci_low"),
    ("ci_high", "ci_high"),
    ("p_value", "p_value"),
)
_COUNT_KEYS: tuple[str, ...] = ("both", "only_a", "only_b", "neither")


def plain_records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready records: NA → None, numpy scalars → Python numbers."""
    plain = rows.astype(object).where(rows.notna(), None)
    return [
        {str(k): (v.item() if isinstance(v, np.generic) else v) for k, v in record.items()}
        for record in plain.to_dict(orient="records")
    ]


def _number(value: object) -> float | None:
    return None if is_missing(value) else float(value)  # type: ignore[arg-type]


def _text(value: object) -> str | None:
    return None if is_missing(value) else str(value)
