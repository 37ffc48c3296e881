"""Problems of a lane declaration that its types cannot catch: names that must resolve.

Each problem is ``(field, message)``; discovery reports them as ``file:0: field: message``.
"""

from __future__ import annotations

from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.predicates import CASE_CHECKS, PREDICATES


def declaration_problems(spec: LaneSpec) -> list[tuple[str, str]]:
    declaration = spec.declaration
    assert declaration is not None
    fields = set(declaration.case_schema.fields)
    problems: list[tuple[str, str]] = []
    problems += [
        (f"case_schema.checks[{i}]", f"unknown case check {name!r}; known: {CASE_CHECKS.names()}")
        for i, name in enumerate(declaration.case_schema.checks)
        if name not in CASE_CHECKS
    ]
    problems += [
        (
            f"case_schema.fields.{name}.check",
            f"unknown case check {field.check!r}; known: {CASE_CHECKS.names()}",
        )
        for name, field in declaration.case_schema.fields.items()
        if field.check is not None and field.check not in CASE_CHECKS
    ]
    problems += [
        (f"threads.turns[{i}].from", f"{source.from_!r} is not a case field; fields: {sorted(fields)}")
        for i, source in enumerate(declaration.threads.turns)
        if source.from_ not in fields
    ]
    on_turns: set[str] = set()
    on_cases: set[str] = set()
    for i, rule in enumerate(declaration.turn_predicates):
        problems += _named(f"turn_predicates[{i}]", rule.predicates, ("turn", "thread_turn"))
        problems += _fields(f"turn_predicates[{i}].where", rule.where, fields)
        if rule.only_if_listed_in is not None:
            problems += _fields(
                f"turn_predicates[{i}].only_if_listed_in", {rule.only_if_listed_in: []}, fields
            )
        on_turns.update(rule.predicates)
        if rule.case_rows is not None:
            on_cases.update(rule.predicates)
    for i, case_rule in enumerate(declaration.case_predicates):
        problems += _named(f"case_predicates[{i}]", case_rule.predicates, ("case",))
        problems += _fields(f"case_predicates[{i}].where", case_rule.where, fields)
        on_cases.update(case_rule.predicates)
        if case_rule.all_listed_in is not None:
            on_cases.add(case_rule.all_listed_in)
    thresholds = {t.metric for t in spec.thresholds}
    declared: list[str] = []
    for name, metric in declaration.metrics.items():
        where = f"metrics.{name}"
        scored = on_cases if metric.over == "cases" else on_turns
        if metric.predicate is not None and metric.predicate not in scored:
            problems.append((where, f"no {metric.over[:-1]} row carries predicate {metric.predicate!r}"))
        for part in metric.all_of or []:
            if part not in declared:
                problems.append((where, f"all_of names {part!r}, which is not a metric declared above it"))
            elif part not in thresholds:
                problems.append((where, f"all_of names {part!r}, which has no threshold to meet"))
        problems += _fields(f"{where}.where", metric.where, fields)
        declared.append(name)
    return problems


def _named(where: str, names: list[str], levels: tuple[str, ...]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for name in names:
        if name not in PREDICATES:
            problems.append((where, f"unknown predicate {name!r}; known: {PREDICATES.names()}"))
        elif PREDICATES.get(name).level not in levels:
            problems.append((where, f"{name!r} is a {PREDICATES.get(name).level} predicate; here: {levels}"))
    return problems


def _fields(where: str, named: dict[str, list[str]], fields: set[str]) -> list[tuple[str, str]]:
    return [(where, f"{name!r} is not a case field") for name in named if name not in fields]
