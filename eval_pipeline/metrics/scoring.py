"""Tables → metrics → threshold outcomes. Pure functions, no Dagster."""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import pandas as pd

from eval_pipeline.metrics.intervals import wilson_interval
from eval_pipeline.predicates.base import TELEMETRY_NOT_SUPPLIED
from eval_pipeline.predicates.explain import not_applicable_why

ThresholdOp = Literal[">=", "<=", "==", ">", "<"]
# The one severity vocabulary: a threshold check blocks (ERROR) or reports (WARN).
Severity = Literal["ERROR", "WARN"]
# One vocabulary for a verdict everywhere (CLI, report, JUnit, Dagster metadata, history):
# pass; fail (a blocking ERROR threshold missed); warn (a WARN one missed); void (the run
# could not measure the runtime: too many turns faulted); n/a (no threshold, or not computable).
VerdictWord = Literal["pass", "fail", "warn", "void", "n/a"]
# Worst first: a run's verdict is the first of these any of its checks says, else pass; an
# invocation's, the worst of its runs' (``error``: a run broke, and has no outcome).
VERDICT_ORDER: tuple[str, ...] = ("error", "void", "fail", "warn", "pass")
DEFAULT_MAX_ERROR_RATE = 0.05
ERROR_RATE = "error_rate"
# A case row's severity, in the spelling EvalCase v1 files use (seed 004 §4) and the
# case_predicates tables keep: "hard" rows are what blocking (ERROR) thresholds gate, "report"
# rows are what WARN thresholds watch. Every lane's case rows use this one alias.
CaseSeverity = Literal["hard", "report"]
# Which statistic of a metric a threshold gates. With one sample per case every one of them is
# the plain value; with N > 1 samples the default is the conservative end of the 95% Wilson
# interval on the side the threshold guards (lower bound for >= and >, upper for <= and <).
Statistic = Literal["mean", "lower_bound", "upper_bound", "pass_hat_k"]
# What a rate's rows are: case rows (case_predicates) or turn rows (turn_predicates).
RowKind = Literal["cases", "turns"]

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
    # Samples per case the value pools (--repeat N), and the metric computed counting a case
    # (or turn) as passing only when all of them pass; None with one sample (it is ``value``).
    samples: int = 1
    all_samples_value: float | None = None
    # When no row applied: the not-applicable rows of the metric's predicate by their code (what
    # emptied the denominator, most first), and what a row is; a void check's reason names them.
    not_applicable: tuple[tuple[str, int], ...] = ()
    rows_are: RowKind = "cases"

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% Wilson interval on numerator / denominator (None for a metric without counts)."""
        if self.numerator is None or self.denominator is None or not self.denominator:
            return None
        return wilson_interval(self.numerator, self.denominator)

    @property
    def pass_hat_k(self) -> float | None:
        """pass^k: the metric when a case passes only if every one of its k samples passes."""
        return self.value if self.samples <= 1 else self.all_samples_value

    def statistic(self, name: Statistic) -> float | None:
        """The value of one statistic; a bound of a metric without counts is its value."""
        if name == "pass_hat_k":
            return self.pass_hat_k
        bounds = self.interval
        if name == "mean" or bounds is None or self.value is None:
            return self.value
        return bounds[0] if name == "lower_bound" else bounds[1]


def number_text(value: float) -> str:
    """A number as every view shows it (terminal, Markdown, HTML report): whole (a count of
    1000000 as 1000000, not 1e+06), else to four significant figures (a rate 0.9333)."""
    return f"{value:.15g}" if float(value).is_integer() else f"{value:.4g}"


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


class PredicateRates:
    """A long predicate table's verdicts as arrays, read once for every rate taken over it;
    ``rows_are`` says what its rows are (cases or turns)."""

    def __init__(self, table: pd.DataFrame, *, key: str = "case_id", rows_are: RowKind = "cases") -> None:
        self._rows_are: RowKind = rows_are
        self._verdict_codes = table["code"] if "code" in table.columns else None
        codes, names = pd.factorize(table["predicate"])
        self._code_of_row = np.asarray(codes)
        self._code_of_name = {str(name): code for code, name in enumerate(names)}
        passed = table["passed"].astype("boolean")
        self._applicable = passed.notna().to_numpy(dtype=bool)
        self._held = passed.to_numpy(dtype=bool, na_value=False)
        self._keys = table[key]

    def rate(self, metric: str, predicate: str) -> MetricValue:
        """Passed / applicable rows of ``predicate``; the keys (cases) of the failing rows."""
        code = self._code_of_name.get(predicate, -2)  # -1 is a null predicate's code
        applicable = (self._code_of_row == code) & self._applicable
        denominator = int(applicable.sum())
        if not denominator:
            return MetricValue(
                metric, None, 0.0, 0.0, not_applicable=self._codes(code), rows_are=self._rows_are
            )
        held = int((applicable & self._held).sum())
        failing = self._keys.iloc[np.flatnonzero(applicable & ~self._held)].astype(str)
        distinct: list[str] = pd.unique(failing).tolist()  # each failing key once (hashed in pandas)
        return MetricValue(
            metric, held / denominator, float(held), float(denominator), tuple(sorted(distinct))
        )

    def _codes(self, code: int) -> tuple[tuple[str, int], ...]:
        """The codes of the rows of predicate ``code`` (none of them applicable), with their counts."""
        if self._verdict_codes is None:
            return ()
        found = self._verdict_codes[self._code_of_row == code].fillna("").astype(str)
        return ranked_codes(Counter(found.tolist()))


def ranked_codes(counts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """(code, rows) pairs, most rows first, then by code."""
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _added_not_applicable(values: Sequence[MetricValue]) -> tuple[tuple[str, int], ...]:
    """The not-applicable codes of one metric measured in parts (case batches, samples), added
    up when no part had an applicable row (else none: the metric was measured, as in one piece)."""
    if any(value.denominator for value in values):
        return ()
    total: Counter[str] = Counter()
    for value in values:
        total.update(dict(value.not_applicable))
    return ranked_codes(total)


def counts_added(values: Sequence[MetricValue], samples: int = 1) -> MetricValue | None:
    """One metric measured in parts (case batches, samples) as if measured whole, when every
    part has counts: numerators and denominators add up, the value is their ratio, the failing
    cases and the not-applicable codes are united. None for a metric without counts."""
    if any(v.numerator is None or v.denominator is None for v in values):
        return None
    numerator = sum(float(v.numerator or 0.0) for v in values)
    denominator = sum(float(v.denominator or 0.0) for v in values)
    first = values[0]
    return MetricValue(
        first.metric,
        numerator / denominator if denominator else None,
        numerator,
        denominator,
        failing_cases_of(values),
        samples,
        not_applicable=_added_not_applicable(values),
        rows_are=first.rows_are,
    )


def failing_cases_of(values: Sequence[MetricValue]) -> tuple[str, ...]:
    """The cases that count against any of ``values`` (one metric's parts), sorted."""
    return tuple(sorted({case for v in values for case in v.failing_case_ids}))


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
    @property
    def statistic(self) -> Statistic | None: ...


def gated_statistic(declared: Statistic | None, op: str, samples: int) -> Statistic:
    """The statistic a threshold gates: the declared one, else the value itself with one sample,
    else the end of the interval on the side the threshold guards (``==`` keeps the value)."""
    if declared is not None:
        return declared
    if samples <= 1 or op == "==":
        return "mean"
    return "lower_bound" if op in (">=", ">") else "upper_bound"


def worst_verdict(words: Iterable[str]) -> str:
    """The worst of ``words`` in :data:`VERDICT_ORDER` (``n/a`` counts for nothing), else pass."""
    present = set(words)
    return next((word for word in VERDICT_ORDER if word in present), "pass")


def verdict_word(passed: bool | None, severity: str | None, *, void: bool = False) -> VerdictWord:
    """The one word for a check's outcome (see :data:`VerdictWord`)."""
    if void:
        return "void"
    if passed is None or severity is None:
        return "n/a"
    if passed:
        return "pass"
    return "fail" if severity == "ERROR" else "warn"


@dataclass(frozen=True)
class Measurement:
    """Whether a run measured its runtime at all: ``error_rate`` against the allowed maximum.

    A void measurement is not a pass: when more turns faulted than ``max_error_rate`` allows,
    the metrics describe the faults, not the runtime, so no threshold of the run counts as passed.
    """

    error_rate: float | None
    max_error_rate: float
    faulted_turns: int = 0
    turns: int = 0

    @property
    def void(self) -> bool:
        return self.error_rate is not None and self.error_rate > self.max_error_rate + 1e-12

    def explain(self) -> str:
        if not self.void:
            return (
                f"measured: error_rate {self.error_rate or 0:.3g} <= max_error_rate {self.max_error_rate:g}"
            )
        return (
            f"void: {self.faulted_turns} of {self.turns} turns faulted (error_rate {self.error_rate:.3g} > "
            f"max_error_rate {self.max_error_rate:g}); the runtime was not measured"
        )


def measurement(metrics: Sequence[MetricValue], max_error_rate: float) -> Measurement:
    """The run's :class:`Measurement` from its ``error_rate`` metric (every lane emits it)."""
    errors = metric_index(metrics).get(ERROR_RATE)
    if errors is None:
        return Measurement(None, max_error_rate)
    return Measurement(errors.value, max_error_rate, int(errors.numerator or 0), int(errors.denominator or 0))


@dataclass(frozen=True)
class ThresholdVerdict:
    """One threshold judged against one run's metric: computed once, rendered everywhere
    (the metrics table's ``passed`` and ``verdict`` columns, the asset check, the CLI, JUnit).

    ``passed`` is False when the check is void: when the run's measurement is void (a check of
    an unmeasured run is never counted as passed, whatever its value), or when its metric could
    not be computed (no case or turn it reads was applicable: nothing was measured, so it is
    neither a pass nor a failure). ``void_reason`` says which, in words.
    """

    threshold: Threshold
    metric: MetricValue
    passed: bool
    void: bool = False
    statistic: Statistic = "mean"
    void_reason: str = ""
    # Its metric's every row was not applicable because the runtime supplied none of the
    # telemetry the predicate reads: the check says nothing of the runtime (n/a, not void).
    not_applicable: bool = False

    @property
    def gated_value(self) -> float | None:
        """The number the threshold was compared with (the metric's gated statistic)."""
        return self.metric.statistic(self.statistic)

    @property
    def bound(self) -> str:
        return f"{self.threshold.op} {self.threshold.value:g}"

    @property
    def word(self) -> VerdictWord:
        if self.not_applicable:
            return "n/a"
        return verdict_word(self.passed, self.threshold.severity, void=self.void)


def judge(
    thresholds: Sequence[Threshold],
    metrics: Sequence[MetricValue],
    *,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
) -> list[ThresholdVerdict]:
    """Every threshold's verdict; a threshold naming a metric the lane did not emit is an error.

    When the run is void (:func:`measurement`), every verdict is void and not passed.
    """
    index = metric_index(metrics)
    missing = sorted({t.metric for t in thresholds} - set(index))
    if missing:
        raise ValueError(f"thresholds name metrics the lane does not emit: {missing}")
    measured = measurement(metrics, max_error_rate)
    verdicts = []
    for t in thresholds:
        metric = index[t.metric]
        statistic = gated_statistic(t.statistic, t.op, metric.samples)
        gated = metric.statistic(statistic)
        reason = measured.explain() if measured.void else "" if gated is not None else not_measured(metric)
        unsupplied = bool(reason) and not measured.void and without_telemetry(metric)
        verdicts.append(
            ThresholdVerdict(
                t,
                metric,
                compare(gated, t.op, t.value) and not reason,
                bool(reason) and not unsupplied,
                statistic,
                reason,
                unsupplied,
            )
        )
    return verdicts


def without_telemetry(metric: MetricValue) -> bool:
    """Whether ``metric`` measured nothing only because the runtime supplied none of the
    telemetry its predicate reads (every row of it coded ``telemetry_not_supplied``)."""
    codes = {code for code, _ in metric.not_applicable}
    return metric.value is None and codes == {TELEMETRY_NOT_SUPPLIED}


def not_measured(metric: MetricValue) -> str:
    """Why a metric that could not be computed says nothing about the runtime: which
    not-applicable codes emptied its denominator, on how many of its rows (the one place the
    sentence is made; the CLI, ``--json``, JUnit and the check metadata show it)."""
    if metric.denominator is None:  # derived from other metrics (all_of), one of them unmeasured
        return "a metric it is derived from measured nothing (see that metric's check)"
    rows = metric.rows_are
    total = sum(n for _, n in metric.not_applicable)
    if not total:
        return f"no {rows[:-1]} it reads was scored (0 {rows}): the run judged nothing it counts"
    named = [(code or "not_applicable", n) for code, n in metric.not_applicable]
    if len(named) == 1:
        (code, n), *_ = named
        return f"{not_applicable_why(code, rows)} ({code} on {n} of {total} {rows})"
    counted = ", ".join(f"{code} on {n}" for code, n in named)
    return f"no {rows[:-1]} qualified (of {total} {rows}: {counted})"


def verdict_sql(words: str) -> str:
    """SQL for the worst verdict in the list expression ``words`` (:data:`VERDICT_ORDER`; pass
    when none of its words is there): for history written before runs stored their outcome."""
    cases = " ".join(f"WHEN list_contains({words}, '{word}') THEN '{word}'" for word in VERDICT_ORDER)
    return f"CASE {cases} ELSE 'pass' END"
