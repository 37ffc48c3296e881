"""A declared case schema as a pydantic model: what ``validate`` and ``run`` check case files with.

Every case model is frozen, forbids unknown fields and has an ``id``. Field bounds become
pydantic constraints; ``aliases`` map accepted spellings before validation; ``check`` and
``checks`` run registered case checks (:data:`eval_pipeline.predicates.CASE_CHECKS`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from eval_pipeline.lanes.declaration import CaseSchema, FieldSpec
from eval_pipeline.predicates import CASE_CHECKS

CASE_ID_PATTERN = r"^[a-z0-9][a-z0-9_.\-]*$"
_CONFIG = ConfigDict(extra="forbid", frozen=True)


def case_model(name: str, schema: CaseSchema) -> type[BaseModel]:
    """The pydantic model of a lane's cases (``name``: the model's title, e.g. ``FluencyCase``)."""
    fields: dict[str, Any] = {"id": (str, Field(pattern=CASE_ID_PATTERN))}
    fields.update(_fields(name, schema.fields))
    validators = {**_field_validators(schema.fields), **_case_validators(schema.checks)}
    return create_model(name, __config__=_CONFIG, __validators__=validators, **fields)


def default_problems(schema: CaseSchema) -> list[tuple[str, str]]:
    """(field, message) for every declared ``default`` its own field's type refuses: said once, of
    lane.yaml, instead of on every case line that leaves the field out."""
    problems = []
    for field, spec in schema.fields.items():
        if not spec.has_default or spec.default is None:
            continue
        try:
            annotated: Any = Annotated[_annotation(f"Case_{field}", spec), _field_info(spec)]
            TypeAdapter(annotated).validate_python(spec.default, strict=True)
        except ValidationError as exc:
            problems.append((f"{field}.default", f"{exc.errors()[0]['msg']} (got {spec.default!r})"))
        except Exception as exc:  # the field itself cannot be built: case_model says why
            problems.append((field, str(exc).splitlines()[0]))
    return problems


def _fields(name: str, specs: dict[str, FieldSpec]) -> dict[str, Any]:
    return {field: (_annotation(f"{name}_{field}", spec), _field_info(spec)) for field, spec in specs.items()}


def _annotation(name: str, spec: FieldSpec) -> Any:
    if spec.enum is not None:
        base: Any = Literal[tuple(spec.enum)]
    elif spec.type == "list":
        assert spec.items is not None
        item = _annotation(name, spec.items)
        bounds = _bounds(spec.items)
        base = list[Annotated[item, Field(**bounds)] if bounds else item]  # type: ignore[misc]
    elif spec.type == "object":
        assert spec.fields is not None
        base = create_model(
            pascal_case(name),
            __config__=_CONFIG,
            __validators__=_field_validators(spec.fields),
            **_fields(name, spec.fields),
        )
    else:
        base = {"str": str, "int": int, "bool": bool}[str(spec.type)]
    if spec.has_default and spec.default is None:
        return base | None
    return base


def _bounds(spec: FieldSpec) -> dict[str, Any]:
    return {
        key: getattr(spec, key)
        for key in ("pattern", "min_length", "max_length", "ge", "description")
        if getattr(spec, key) is not None
    }


def _field_info(spec: FieldSpec) -> Any:
    bounds = _bounds(spec)
    if not spec.has_default:
        return Field(**bounds)
    if isinstance(spec.default, list | dict):
        default = spec.default
        return Field(default_factory=lambda: type(default)(default), **bounds)
    return Field(default=spec.default, **bounds)


def _field_validators(specs: dict[str, FieldSpec]) -> dict[str, Any]:
    validators: dict[str, Any] = {}
    for field, spec in specs.items():
        aliases = spec.aliases or (spec.items.aliases if spec.items else {})
        if aliases:
            validators[f"_aliases_{field}"] = field_validator(field, mode="before")(_alias_mapper(aliases))
        if spec.check:
            check = CASE_CHECKS.get(spec.check)
            validators[f"_check_{field}"] = field_validator(field)(classmethod(lambda cls, v, c=check: c(v)))
    return validators


def _alias_mapper(aliases: dict[str, str]) -> Any:
    spellings = aliases.keys()

    def canonical(cls: type[BaseModel], value: Any) -> Any:
        if isinstance(value, list):
            # Most lists hold no alias (and a stored case never does): one test in C, no copy.
            # Keys are text, so only a text item can be one; an unhashable item takes the long way.
            try:
                if spellings.isdisjoint(value):
                    return value
            except TypeError:
                pass
            return [aliases.get(v, v) if isinstance(v, str) else v for v in value]
        return aliases.get(value, value) if isinstance(value, str) else value

    return classmethod(canonical)


def _case_validators(checks: list[str]) -> dict[str, Any]:
    validators: dict[str, Any] = {}
    for name in checks:
        check = CASE_CHECKS.get(name)
        validators[f"_check_{name}"] = model_validator(mode="after")(lambda case, c=check: c(case))
    return validators


def pascal_case(name: str) -> str:
    """``snake_case`` as ``SnakeCase``: a model's name from a lane's or a field's."""
    return "".join(part.capitalize() for part in name.split("_"))
