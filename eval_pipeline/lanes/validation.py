"""Problems of a lane declaration that its types cannot catch: names that must resolve, and
values that must agree with each other (a rule's role with the threads, a ``where`` value with
its field's enum, a rate's threshold with [0, 1], a default with its field's type).

Each problem is ``(field, message)``; discovery reports them as ``file:line: field: message``
at the line of that field in ``lane.yaml``.
"""

from __future__ import annotations

from eval_pipeline.lanes.declaration import Declaration
from eval_pipeline.lanes.kind import COMMON_METRICS
from eval_pipeline.lanes.schema import case_model, default_problems
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.metrics import USAGE_METRICS
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
        if name in COMMON_METRICS or name in USAGE_METRICS:
            problems.append((where, f"{name!r} is a metric every lane emits; name this one differently"))
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
    problems += _roles(declaration)
    problems += _enum_values(declaration)
    problems += _rate_thresholds(spec)
    problems += [
        (f"case_schema.fields.{field}", message)
        for field, message in default_problems(declaration.case_schema)
    ]
    try:
        case_model("Case", declaration.case_schema)
    except Exception as exc:  # a pattern pydantic's engine refuses, a field name it cannot take
        problems.append(("case_schema", f"cannot be built into a case model: {str(exc).splitlines()[0]}"))
    return problems


def _roles(declaration: Declaration) -> list[tuple[str, str]]:
    """A turn rule's role must be the role of some turn its threads send."""
    roles = {source.role for source in declaration.threads.turns}
    return [
        (f"turn_predicates[{i}].role", f"no turn has role {rule.role!r}; the threads send {sorted(roles)}")
        for i, rule in enumerate(declaration.turn_predicates)
        if rule.role is not None and rule.role not in roles
    ]


def _enum_values(declaration: Declaration) -> list[tuple[str, str]]:
    """A ``where`` value of an enum field must be one of its values (else it matches no case)."""
    specs = declaration.case_schema.fields
    named = [
        *((f"turn_predicates[{i}].where", rule.where) for i, rule in enumerate(declaration.turn_predicates)),
        *((f"case_predicates[{i}].where", rule.where) for i, rule in enumerate(declaration.case_predicates)),
        *((f"metrics.{name}.where", metric.where) for name, metric in declaration.metrics.items()),
    ]
    problems = []
    for where, accepted in named:
        for field, values in accepted.items():
            enum = (specs[field].enum if field in specs else None) or []
            problems += [
                (f"{where}.{field}", f"{value!r} is not one of {field}'s values {enum}")
                for value in values
                if enum and value not in enum
            ]
    return problems


def _rate_thresholds(spec: LaneSpec) -> list[tuple[str, str]]:
    """A threshold on a rate (every value between 0 and 1) must lie in [0, 1]: else it always or never holds."""
    declaration = spec.declaration
    assert declaration is not None
    rates = {name for name, metric in declaration.metrics.items() if metric.count is None} | set(
        COMMON_METRICS
    )
    return [
        (
            f"thresholds[{i}].value",
            f"{t.metric!r} is a rate, between 0 and 1; a bound of {t.value:g} is never met or always met",
        )
        for i, t in enumerate(spec.thresholds)
        if t.metric in rates and not 0.0 <= t.value <= 1.0
    ]


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
