"""A lane scored from its declaration: threads, predicate rows and metrics, all from lane.yaml.

Pure: cases and DataFrames in, DataFrames and metric values out. Rows come out in the order
the kinds in code produced them (per transcript row then per rule; per case then per rule),
so a declared lane's tables are those of the code it replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from pydantic import BaseModel

from eval_pipeline.lanes.declaration import (
    CaseRows,
    CaseRule,
    Declaration,
    ListedSeverity,
    MetricSpec,
    TurnRule,
)
from eval_pipeline.lanes.kind import Scored, Thread, TurnRequest
from eval_pipeline.lanes.schema import case_model
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.predicates import PREDICATES, TurnView, Verdict, reason
from eval_pipeline.predicates.rows import case_row, stored_verdict, turn_row
from eval_pipeline.scoring import CaseSeverity, MetricValue, compare, count, predicate_rate
from eval_pipeline.tables import CASE_PREDICATES, TURN_PREDICATES, lane_columns

MISSING_TURN = "turn missing from transcripts"


class DeclaredLane:
    """The lane kind of a lane declared in its lane.yaml."""

    def __init__(self, spec: LaneSpec) -> None:
        declaration = spec.declaration
        if declaration is None:
            raise ValueError(f"lane {spec.name!r} names kind {spec.kind!r}; it declares no scoring")
        self.spec = spec
        self.declaration: Declaration = declaration
        self.case_model: type[BaseModel] = case_model(_title(spec.name) + "Case", declaration.case_schema)
        self.metric_names: tuple[str, ...] = tuple(declaration.metrics)

    # --- threads -----------------------------------------------------------------------------

    def sourced_turns(self, case: Any) -> list[tuple[TurnRequest, Any]]:
        """The case's turns in sending order, each with the case item it came from."""
        turns: list[tuple[TurnRequest, Any]] = []
        for source in self.declaration.threads.turns:
            value = getattr(case, source.from_)
            for item in value if isinstance(value, list) else [value]:
                prompt = getattr(item, source.prompt) if source.prompt else item
                turns.append((TurnRequest(turn_index=len(turns), role=source.role, prompt=prompt), item))
        return turns

    def threads(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[Thread]:
        session = f"{spec.name}/{split}" if self.declaration.threads.session == "warm" else None
        return [
            Thread(case_id=case.id, turns=tuple(t for t, _ in self.sourced_turns(case)), session=session)
            for case in cases
        ]

    # --- turn predicates ---------------------------------------------------------------------

    def turn_predicates(self, cases: Sequence[Any], transcripts: pd.DataFrame) -> pd.DataFrame:
        """Each rule's predicates on the turns of its role, in cases matching its ``where``."""
        by_id = {case.id: case for case in cases}
        views = recorded_turns(self, cases, transcripts)
        rows: list[dict[str, Any]] = []
        for record in transcripts.to_dict("records"):
            case = by_id[record["case_id"]]
            index = int(record["turn_index"])
            item = self.sourced_turns(case)[index][1]
            for rule in self.declaration.turn_predicates:
                if (rule.role is not None and record["role"] != rule.role) or not matches(case, rule.where):
                    continue
                listed = getattr(case, rule.only_if_listed_in) if rule.only_if_listed_in else rule.predicates
                for name in (n for n in rule.predicates if n in listed):
                    verdict = _turn_verdict(rule, name, views[case.id], index, item)
                    rows.append(turn_row(case.id, index, name, verdict))
        return pd.DataFrame(rows, columns=lane_columns(TURN_PREDICATES))

    # --- case predicates ---------------------------------------------------------------------

    def case_predicates(
        self, cases: Sequence[Any], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
    ) -> pd.DataFrame:
        """Per case: the scored turn's verdicts (rules with ``case_rows``), then the case rules."""
        by_key = {(r["case_id"], r["predicate"]): r for r in turn_predicates.to_dict("records")}
        views = recorded_turns(self, cases, transcripts)
        rows: list[dict[str, Any]] = []
        for case in cases:
            lifted: dict[str, Verdict] = {}
            for rule in self.declaration.turn_predicates:
                if rule.case_rows is None or not matches(case, rule.where):
                    continue
                for name in rule.predicates:
                    verdict = stored_verdict(by_key.get((case.id, name)), missing_code=rule.case_rows.missing)
                    lifted[name] = verdict
                    rows.append(
                        case_row(
                            case.id,
                            name,
                            verdict,
                            severity=_severity(rule.case_rows, case, name),
                            message=_message(rule.case_rows, name, verdict, case),
                        )
                    )
            for case_rule in self.declaration.case_predicates:
                if matches(case, case_rule.where):
                    rows.extend(_case_rule_rows(case_rule, case, views[case.id], lifted))
        return pd.DataFrame(rows, columns=lane_columns(CASE_PREDICATES))

    # --- metrics -----------------------------------------------------------------------------

    def metrics(self, scored: Scored) -> list[MetricValue]:
        cases = scored.cases
        thresholds = {t.metric: t for t in self.spec.effective_thresholds}
        values: dict[str, MetricValue] = {}
        for name, metric in self.declaration.metrics.items():
            if metric.count == "cases":
                values[name] = count(name, len(cases))
            elif metric.count == "turns":
                values[name] = count(name, sum(len(self.sourced_turns(case)) for case in cases))
            elif metric.all_of is not None:
                parts = [values[part] for part in metric.all_of]
                values[name] = all_hold(name, parts, [thresholds[part] for part in metric.all_of])
            else:
                table = scored.case_predicates if metric.over == "cases" else scored.turn_predicates
                values[name] = _rate(name, metric, _where(table, cases, metric.where))
        return list(values.values())


def recorded_turns(
    lane: DeclaredLane, cases: Sequence[Any], transcripts: pd.DataFrame
) -> dict[str, list[TurnView]]:
    """Every declared turn of every case as recorded; a turn the transcripts lack is a faulted stand-in."""
    recorded = {(r["case_id"], int(r["turn_index"])): r for r in transcripts.to_dict("records")}
    views: dict[str, list[TurnView]] = {}
    for case in cases:
        views[case.id] = [
            TurnView.from_row(recorded[(case.id, turn.turn_index)])
            if (case.id, turn.turn_index) in recorded
            else TurnView(surface="", error=MISSING_TURN)
            for turn, _ in lane.sourced_turns(case)
        ]
    return views


def matches(case: Any, where: Mapping[str, Sequence[str]]) -> bool:
    """Whether every named case field holds one of its accepted values."""
    return all(getattr(case, field) in accepted for field, accepted in where.items())


def _turn_verdict(rule: TurnRule, name: str, turns: Sequence[TurnView], index: int, item: Any) -> Verdict:
    unless = rule.unless.get(name)
    if unless is not None and getattr(item, unless.field) is False:
        return Verdict.not_applicable(unless.code)
    return PREDICATES.get(name).on_turn(turns, index)


def _severity(rows: CaseRows, case: Any, predicate: str) -> CaseSeverity:
    if isinstance(rows.severity, ListedSeverity):
        return "hard" if predicate in getattr(case, rows.severity.hard_if_listed_in) else "report"
    return rows.severity


def _message(rows: CaseRows, predicate: str, verdict: Verdict, case: Any) -> str:
    if rows.message is None:
        return reason(predicate, verdict)
    template = {True: rows.message.passed, False: rows.message.failed, None: rows.message.not_applicable}
    return template[verdict.passed].format(
        predicate=predicate, code=verdict.code, case=case, reason=reason(predicate, verdict)
    )


def _case_rule_rows(
    rule: CaseRule, case: Any, turns: Sequence[TurnView], lifted: Mapping[str, Verdict]
) -> list[dict[str, Any]]:
    if rule.all_listed_in is not None:
        names = getattr(case, rule.all_listed_in)
        if not names:
            return []
        failing = [n for n in names if lifted[n].passed is False]
        verdict = Verdict.fail("contract_failed", failing=failing) if failing else Verdict.ok(failing=[])
        message = reason(rule.all_listed_in, verdict) if failing else "Every listed predicate holds."
        return [case_row(case.id, rule.all_listed_in, verdict, severity=rule.severity, message=message)]
    rows = []
    for name in rule.predicates:
        predicate = PREDICATES.get(name)
        verdict = predicate.function(case, turns)
        message = (predicate.explain or reason)(name, verdict)
        rows.append(case_row(case.id, name, verdict, severity=rule.severity, message=message))
    return rows


def _where(table: pd.DataFrame, cases: Sequence[Any], where: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    if not where:
        return table
    ids = {str(case.id) for case in cases if matches(case, where)}
    return table[table["case_id"].astype(str).isin(ids)]


def _rate(name: str, metric: MetricSpec, table: pd.DataFrame) -> MetricValue:
    assert metric.predicate is not None
    held = predicate_rate(name, table, metric.predicate)
    if metric.rate is not None or held.value is None or held.numerator is None or held.denominator is None:
        return held
    failed = held.denominator - held.numerator
    return MetricValue(name, failed / held.denominator, failed, held.denominator, held.failing_case_ids)


def all_hold(name: str, parts: Sequence[MetricValue], thresholds: Sequence[Any]) -> MetricValue:
    """1.0 when every part meets its threshold, 0.0 when one does not, null when a part is null."""
    if any(part.value is None for part in parts):
        return MetricValue(name, None)
    held = all(compare(p.value, t.op, t.value) for p, t in zip(parts, thresholds, strict=True))
    failing = tuple(sorted({case for part in parts for case in part.failing_case_ids}))
    return MetricValue(name, 1.0 if held else 0.0, failing_case_ids=() if held else failing)


def _title(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))
