"""A lane run's outcome: decided once, where its metrics are judged, and rendered everywhere.

The metrics step judges the run (:func:`judged_outcome`: every threshold check, the measurement,
the failing items of case and turn rows, the faults); the history step adds the regression
check and stores the outcome with the run's manifest. The CLI table and exit code, ``show``,
``--json``, JUnit, ``--summary-md``, notifications, the viewer and the Dagster check metadata
all read this object back and derive nothing from it but text.

The verdict order, the void rule and the check names are defined here, and nowhere else. This
module imports no Dagster.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, cast

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.core import OfSeries, Series
from eval_pipeline.history.runs import RUN_MATCH, RunRef, is_missing
from eval_pipeline.lanes import LaneSpec, lane_kind
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.metrics import (
    Measurement,
    MetricValue,
    Threshold,
    ThresholdVerdict,
    VerdictWord,
    judge,
    measurement,
    samples_in,
    worst_verdict,
)
from eval_pipeline.outcome.failures import (
    FAILING_READS,
    FirstFailing,
    evidence_object,
    failing_cases,
    fault_counts,
)
from eval_pipeline.predicates import Verdict
from eval_pipeline.predicates import reason as verdict_reason
from eval_pipeline.predicates.base import TELEMETRY_NOT_SUPPLIED
from eval_pipeline.tables import StageFile, failed, faulted

# The lane-level checks, by the names their Dagster asset checks carry.
MEASUREMENT_CHECK = "measurement"
REGRESSION_CHECK = "no_regression"
GATE_CHECK = "error_thresholds_hold"
LANE_CHECKS = (MEASUREMENT_CHECK, REGRESSION_CHECK)  # the checks of a run that gate no one metric
# Failing items an outcome keeps (hard first); the rest are counted, and `show` reads the tables.
FAILING_ITEMS_KEPT = 200
# The severity of a failing case row whose metric blocks, as case rows spell it (seed 004 §4).
HARD, REPORT = "hard", "report"


@dataclass(frozen=True)
class CheckOutcome:
    """One check of a lane run: a threshold on a metric, or a lane-level check (measurement,
    no_regression). ``reason`` says why a check reads void or n/a; ``description`` is the one
    sentence every surface shows."""

    name: str
    passed: bool
    severity: str
    value: float | None
    threshold: str | None
    verdict: VerdictWord = "n/a"  # pass / fail / warn / void / n/a
    description: str = ""
    n: float | None = None  # the metric's denominator (applicable cases or turns)
    reason: str = ""
    failing_case_ids: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)  # JSON values a check adds (regressed metrics)


@dataclass(frozen=True)
class FailingItem:
    """One failing verdict of a run: a case row, or a turn row of a case judged per turn
    (``turn_index`` set). ``severity`` is ``hard`` (what a blocking check counts) or ``report``."""

    case_id: str
    predicate: str
    severity: str
    code: str
    reason: str
    turn_index: int | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """``turn 3`` for a turn row, else empty."""
        return "" if self.turn_index is None else f"turn {self.turn_index}"

    @property
    def text(self) -> str:
        """The reason, naming the turn where the case failed at one: ``turn 3: …``."""
        return f"{self.where}: {self.reason}" if self.where else self.reason


# Values a JSON document holds as they are: a tuple of only these is kept whole, not walked.
_LEAVES = (str, int, float, bool, type(None))


def _plain_document(value: Any) -> Any:
    """What :func:`dataclasses.asdict` makes of ``value`` for a JSON document (dataclasses as
    dicts, walked into lists, tuples and dicts), without walking a sequence of plain values
    one element at a time: a check of a million-case run lists its failing cases' ids."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain_document(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        if all(isinstance(item, _LEAVES) for item in value):
            return value
        return [_plain_document(item) for item in value]
    if isinstance(value, dict):
        return {_plain_document(key): _plain_document(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class RunOutcome(OfSeries):
    """What one lane run found, as every surface shows it."""

    series: Series
    run_id: str
    checks: tuple[CheckOutcome, ...]
    failing: tuple[FailingItem, ...] = ()  # the first FAILING_ITEMS_KEPT, hard first
    failing_results: int = 0  # failing items in all
    failing_cases: int = 0  # distinct cases among them
    faults: tuple[Mapping[str, Any], ...] = ()  # failures.fault_counts entries
    void_reason: str = ""  # set when the run did not measure its runtime (the void rule: Measurement)
    # The predicates whose rows read n/a because the runtime supplied none of the telemetry
    # they read → those fields (decided where the rows were built: predicates.telemetry).
    telemetry_not_supplied: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def void(self) -> bool:
        return bool(self.void_reason)

    @property
    def verdict(self) -> VerdictWord:
        """void, else the worst word of its checks."""
        return cast(VerdictWord, "void" if self.void else worst_verdict(c.verdict for c in self.checks))

    @property
    def blocking_failures(self) -> list[CheckOutcome]:
        """The checks that fail the run: a blocking (ERROR) check that failed, not a void one."""
        return [c for c in self.checks if c.verdict == "fail"]

    @property
    def failing_case_ids(self) -> list[str]:
        return list(dict.fromkeys(item.case_id for item in self.failing))

    def case_verdict(self, case_id: str) -> str:
        """A case's verdict in this run: void, else fail when a blocking check counts it or a hard
        item of it failed, warn likewise for a reporting one, else pass."""
        if self.void:
            return "void"
        words = [
            ("fail" if item.severity == HARD else "warn") for item in self.failing if item.case_id == case_id
        ]
        words += [
            c.verdict for c in self.checks if c.verdict in ("fail", "warn") and case_id in c.failing_case_ids
        ]
        return worst_verdict(words)

    def check(self, name: str) -> CheckOutcome | None:
        return next((c for c in self.checks if c.name == name), None)

    def items_of(
        self, case_ids: Sequence[str], predicates: frozenset[str] | None = None
    ) -> list[FailingItem]:
        """The failing items of ``case_ids`` (of ``predicates`` only, when given)."""
        wanted = set(case_ids)
        return [
            item
            for item in self.failing
            if item.case_id in wanted and (predicates is None or item.predicate in predicates)
        ]

    def with_check(self, check: CheckOutcome) -> RunOutcome:
        """This outcome with ``check`` added (or replacing the check of its name)."""
        kept = tuple(c for c in self.checks if c.name != check.name)
        return replace(self, checks=(*kept, check))

    def to_json(self) -> str:
        document = _plain_document(self)
        document["series"] = self.series.columns()
        document["verdict"] = self.verdict  # for queries over history (the runs view); not read back
        return json.dumps(document, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunOutcome:
        document = json.loads(text)
        return cls(
            series=Series(**document["series"]),
            run_id=str(document["run_id"]),
            checks=tuple(
                CheckOutcome(**{**c, "failing_case_ids": tuple(c.get("failing_case_ids") or ())})
                for c in document["checks"]
            ),
            failing=tuple(FailingItem(**item) for item in document["failing"]),
            failing_results=int(document["failing_results"]),
            failing_cases=int(document["failing_cases"]),
            faults=tuple(document["faults"]),
            void_reason=str(document.get("void_reason") or ""),
            telemetry_not_supplied={
                str(name): tuple(fields)
                for name, fields in (document.get("telemetry_not_supplied") or {}).items()
            },
        )


def failing_sentence(case_ids: Sequence[str], *, shown: int = 5) -> str:
    """``3 failing case(s): a, b, c.`` (the first few; the check's table has the rest)."""
    listed = ", ".join(case_ids[:shown]) + (
        f" and {len(case_ids) - shown} more" if len(case_ids) > shown else ""
    )
    return f"{len(case_ids)} failing case(s): {listed}."


METRIC_DIGITS = 4  # values shown are rounded: 0.9333, not 0.9333333333333333


def rounded(value: float) -> float:
    return round(float(value), METRIC_DIGITS)


def failed_sentence(verdict: ThresholdVerdict) -> str:
    """``no_dotted_inventory_rate = 0.3333, needs >= 0.9 (ERROR).``: what failed, in one line."""
    value = "missing" if verdict.metric.value is None else f"{rounded(verdict.metric.value):g}"
    gated = (
        f" ({verdict.statistic} {rounded(verdict.gated_value):g})"
        if verdict.gated_value is not None and verdict.statistic != "mean"
        else ""
    )
    return f"{verdict.metric.metric} = {value}{gated}, needs {verdict.bound} ({verdict.threshold.severity})."


def threshold_check(verdict: ThresholdVerdict) -> CheckOutcome:
    """A threshold's verdict as a check: what failed first, then which cases, then why it exists."""
    m, t = verdict.metric, verdict.threshold
    said = {"void": f"void: {verdict.void_reason}", "n/a": f"n/a: {verdict.void_reason}"}
    sentences = [said.get(verdict.word, t.reason)]
    if m.failing_case_ids and not verdict.passed:
        sentences.insert(0, failing_sentence(m.failing_case_ids))
    if not verdict.passed and verdict.word not in said:
        sentences.insert(0, failed_sentence(verdict))
    return CheckOutcome(
        name=t.metric,
        passed=verdict.passed,
        severity=t.severity,
        value=m.value,
        threshold=verdict.bound,
        verdict=verdict.word,
        description=" ".join(sentences),
        n=m.denominator,
        reason=verdict.void_reason,
        failing_case_ids=m.failing_case_ids,
        metadata={}
        if m.samples <= 1
        else {
            "samples": m.samples,
            "statistic": verdict.statistic,
            **({} if verdict.gated_value is None else {"gated_value": float(verdict.gated_value)}),
        },
    )


def measurement_check(measured: Measurement) -> CheckOutcome:
    return CheckOutcome(
        name=MEASUREMENT_CHECK,
        passed=not measured.void,
        severity="ERROR",
        value=measured.error_rate,
        threshold=f"<= {measured.max_error_rate:g}",
        verdict="void" if measured.void else "pass",
        description=measured.explain(),
        n=float(measured.turns),
        reason=measured.explain() if measured.void else "",
    )


def regression_check(
    *, regressed: Sequence[str], description: str, first_run: bool, void: bool, metadata: Mapping[str, Any]
) -> CheckOutcome:
    """The ``no_regression`` check: n/a when it compared nothing (a series' first run, a void
    run), never pass."""
    why = "void run" if void else "first run of this series" if first_run else ""
    return CheckOutcome(
        name=REGRESSION_CHECK,
        passed=not regressed,
        severity="WARN",
        value=None,
        threshold=None,
        verdict="n/a" if why else "warn" if regressed else "pass",
        description=f"n/a: {why}" if why else description,
        reason=why,
        metadata=dict(metadata),
    )


def turn_severities(thresholds: Sequence[Threshold], metric_rows: Mapping[str, MetricRows]) -> dict[str, str]:
    """The severity of each predicate judged per turn: ``hard`` when a blocking (ERROR)
    threshold's rate counts its turn rows, else ``report``."""
    severity: dict[str, str] = {}
    for t in thresholds:
        rows = metric_rows.get(t.metric)
        if rows is None or rows.over != "turns" or rows.predicates is None:
            continue
        for predicate in rows.predicates:
            if t.severity == "ERROR" or severity.get(predicate) != HARD:
                severity[predicate] = HARD if t.severity == "ERROR" else REPORT
    return severity


def failing_items(
    case_rows: FirstFailing,
    turn_rows: pd.DataFrame,
    severities: Mapping[str, str],
    *,
    limit: int = FAILING_ITEMS_KEPT,
) -> tuple[list[FailingItem], int, int]:
    """The run's failing items, hard first, the first ``limit`` of them, with how many there
    are in all and of how many cases: its failing case rows (:func:`failing_cases`), and the
    failing turn rows (``turn_rows``: case_id, turn_index, predicate, code, evidence) of each
    case none of whose case rows failed — a case judged per turn fails there, and is listed."""
    items = [
        FailingItem(
            case_id=str(row["case_id"]),
            predicate=str(row["predicate"]),
            severity=str(row["severity"]),
            code=str(row["code"]),
            reason=str(row["reason"]),
            evidence=_plain(row["evidence"]),
        )
        for row in case_rows.rows.to_dict("records")
    ]
    listed = set(case_rows.rows["case_id"].astype(str)) if case_rows.results else set()
    turns, results, turn_cases = _failing_turns(turn_rows, listed, severities, limit)
    merged = sorted(
        items + turns, key=lambda item: (item.severity != HARD, item.case_id, item.turn_index or -1)
    )
    return merged[:limit], case_rows.results + results, case_rows.cases + turn_cases


def _failing_turns(
    turn_rows: pd.DataFrame, listed: set[str], severities: Mapping[str, str], limit: int
) -> tuple[list[FailingItem], int, int]:
    """The failing turn rows of the cases not ``listed``, once each: the first ``limit`` of
    them in the order :func:`failing_items` lists items (hard first, then by case and turn) as
    items, with how many there are in all and of how many cases. Only the items kept are
    explained (a million turns may fail; a few hundred are listed)."""
    if not len(turn_rows):
        return [], 0, 0
    ordered = turn_rows.sort_values(["case_id", "turn_index", "predicate"], kind="stable")
    ordered = ordered.drop_duplicates(["case_id", "turn_index", "predicate"])
    case_ids = ordered["case_id"].astype(str).tolist()
    keys = [
        (severities.get(str(predicate), REPORT) != HARD, case_id, int(turn) or -1, position)
        for position, (case_id, turn, predicate) in enumerate(
            zip(case_ids, ordered["turn_index"].tolist(), ordered["predicate"].tolist(), strict=True)
        )
        if case_id not in listed
    ]
    kept = [key[-1] for key in heapq.nsmallest(limit, keys)]
    turns: list[FailingItem] = []
    for row in ordered.iloc[kept].to_dict("records"):
        evidence = evidence_object(row.get("evidence"))
        code = str(row.get("code") or "")
        predicate = str(row["predicate"])
        turns.append(
            FailingItem(
                case_id=str(row["case_id"]),
                predicate=predicate,
                severity=severities.get(predicate, REPORT),
                code=code,
                reason=verdict_reason(predicate, Verdict(False, code, evidence)),
                turn_index=int(row["turn_index"]),
                evidence=_plain(evidence),
            )
        )
    return turns, len(keys), len({key[1] for key in keys})


def _plain(evidence: Any) -> dict[str, Any]:
    """Evidence as JSON values (a stored outcome is JSON)."""
    return cast(dict[str, Any], json.loads(json.dumps(evidence_object(evidence), default=str)))


def judged_outcome(
    series: Series,
    run_id: str,
    verdicts: Sequence[ThresholdVerdict],
    measured: Measurement,
    failing: tuple[list[FailingItem], int, int],
    faulted_turns: pd.DataFrame,
    not_supplied: pd.DataFrame | None = None,
) -> RunOutcome:
    """The outcome of a judged run (before history adds its regression check); ``not_supplied``:
    rows (predicate, evidence) coded ``telemetry_not_supplied``."""
    items, results, cases = failing
    return RunOutcome(
        series=series,
        run_id=run_id,
        checks=(measurement_check(measured), *(threshold_check(v) for v in verdicts)),
        failing=tuple(items),
        failing_results=results,
        failing_cases=cases,
        faults=tuple(fault_counts(faulted_turns)),
        void_reason=measured.explain() if measured.void else "",
        telemetry_not_supplied=_not_supplied(not_supplied),
    )


def _not_supplied(rows: pd.DataFrame | None) -> dict[str, tuple[str, ...]]:
    """Each predicate of ``rows`` (coded ``telemetry_not_supplied``) → the fields its evidence
    names, in predicate order."""
    if rows is None or rows.empty:
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for row in rows.drop_duplicates("predicate").sort_values("predicate").to_dict("records"):
        found[str(row["predicate"])] = tuple(evidence_object(row["evidence"]).get("unsupplied") or ())
    return found


# A judged run's stage files: case predicates, turn predicates, transcripts.
JudgedTables = tuple[StageFile, StageFile, StageFile]


def judge_run(
    spec: LaneSpec,
    series: Series,
    run_id: str,
    values: Sequence[MetricValue],
    max_error_rate: float,
    tables: JudgedTables,
) -> tuple[list[ThresholdVerdict], RunOutcome]:
    """Judge a run once: its thresholds' verdicts (the metrics table's columns) and its outcome:
    its checks, its failing items (case rows, and the turn rows of cases judged per turn), its
    faults and whether it is void (more turns faulted than ``max_error_rate`` allows)."""
    verdicts = judge(spec.effective_thresholds, values, max_error_rate=max_error_rate)
    measured = measurement(values, max_error_rate)
    case_predicates, turn_predicates, transcripts = tables
    case_rows = failing_cases(
        case_predicates.batches(FAILING_READS),
        samples_in(case_predicates),
        FAILING_ITEMS_KEPT,
        case_predicates.batch,
    )
    turn_rows = turn_predicates.read(
        ["case_id", "turn_index", "predicate", "passed", "code", "evidence"], where=failed()
    )
    severities = turn_severities(spec.effective_thresholds, lane_kind(spec).metric_rows)
    unsupplied = pc.field("code") == pa.scalar(TELEMETRY_NOT_SUPPLIED)
    not_supplied = pd.concat(
        [
            table.read(["predicate", "code", "evidence"], where=unsupplied)
            for table in (turn_predicates, case_predicates)
        ]
    )
    return verdicts, judged_outcome(
        series,
        run_id,
        verdicts,
        measured,
        failing_items(case_rows, turn_rows, severities),
        transcripts.read(["case_id", "error"], where=faulted()),
        not_supplied,
    )


def committed_outcome(con: duckdb.DuckDBPyConnection, ref: RunRef) -> RunOutcome | None:
    """The outcome a committed run stored with its manifest (None: committed before runs stored
    one)."""
    row = con.execute(f"SELECT outcome FROM run_manifests WHERE {RUN_MATCH}", ref.params()).fetchone()
    return None if row is None or is_missing(row[0]) else RunOutcome.from_json(str(row[0]))
