"""What a declared lane's ``lane.yaml`` says beyond its splits and thresholds.

Four blocks: ``case_schema`` (the fields of a case, built into a pydantic model),
``threads`` (how a case becomes the prompts sent in its session), ``turn_predicates`` and
``case_predicates`` (which predicates apply to which turns and cases, and the case rows they
give) and ``metrics`` (each metric once: a rate of a predicate, a failure rate, a count, or
every listed metric meeting its threshold). The metric names a lane emits are the keys of
``metrics``. Predicates are found by name in :data:`eval_pipeline.predicates.PREDICATES`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eval_pipeline.metrics import CaseSeverity

_NAME = r"^[a-z][a-z0-9_]*$"


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldSpec(_Block):
    """One case field: its type and bounds. ``default`` (even null) makes it optional."""

    type: Literal["str", "int", "bool", "list", "object"] | None = None
    enum: list[str] | None = Field(default=None, min_length=1)
    description: str | None = None
    pattern: str | None = None
    min_length: int | None = Field(default=None, ge=0)
    max_length: int | None = Field(default=None, ge=0)
    ge: int | None = None
    default: Any = None
    items: FieldSpec | None = Field(default=None, description="The type of a list's items.")
    fields: dict[str, FieldSpec] | None = Field(default=None, description="The fields of an object.")
    aliases: dict[str, str] = Field(
        default_factory=dict, description="Accepted spellings of enum values (list items too)."
    )
    check: str | None = Field(default=None, description="A registered case check run on this field.")

    @model_validator(mode="after")
    def _shape(self) -> FieldSpec:
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern {self.pattern!r} is not a regular expression: {exc}") from None
        for name in self.fields or {}:
            if not re.match(_NAME, name):
                raise ValueError(f"field name {name!r} must match {_NAME}")
        if (self.type is None) == (self.enum is None):
            raise ValueError("a field has either a type or an enum")
        if self.type == "list" and self.items is None:
            raise ValueError("a list field says the type of its items")
        if self.type == "object" and not self.fields:
            raise ValueError("an object field lists its fields")
        return self

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set


class CaseSchema(_Block):
    """A case: an ``id`` (always present) plus these fields, and checks across fields."""

    fields: dict[str, FieldSpec] = Field(min_length=1)
    checks: list[str] = Field(default_factory=list, description="Registered case checks on the whole case.")

    @field_validator("fields")
    @classmethod
    def _names(cls, fields: dict[str, FieldSpec]) -> dict[str, FieldSpec]:
        for name in fields:
            if not re.match(_NAME, name) or name == "id":
                raise ValueError(f"field name {name!r} must match {_NAME} and not be id (every case has one)")
        return fields


class TurnSource(_Block):
    """Turns taken from one case field: a string (one turn) or a list (one turn per item)."""

    role: str = Field(pattern=_NAME, description="The transcript role of these turns (setup, probe, ...).")
    from_: str = Field(alias="from", pattern=_NAME, description="The case field the prompts come from.")
    prompt: str | None = Field(
        default=None, pattern=_NAME, description="For a list of objects: the item field holding the prompt."
    )


class Threads(_Block):
    """How a case becomes a thread: its turn sources, in the order they are sent.

    ``session``: ``per_case`` opens a fresh session for every case; ``warm`` plays every case
    of a split, in file order, in one long-lived session, so state accumulates across cases.
    """

    session: Literal["per_case", "warm"] = "per_case"
    turns: list[TurnSource] = Field(min_length=1)


class ListedSeverity(_Block):
    """``hard`` for a predicate the case lists in this field, else ``report``."""

    hard_if_listed_in: str = Field(pattern=_NAME)


class Messages(_Block):
    """Case-row messages; ``{predicate}``, ``{code}``, ``{reason}`` (the
    verdict's sentence) and ``{case.<field>}`` are filled in."""

    passed: str
    failed: str
    not_applicable: str = "{predicate} does not apply ({code})"


class CaseRows(_Block):
    """A turn rule's verdicts on the case's scored turn become case rows too."""

    severity: CaseSeverity | ListedSeverity
    missing: str = Field(
        default="no_scored_turn", pattern=_NAME, description="Code of a case whose turn was not recorded."
    )
    message: Messages | None = None


class NotApplicableUnless(_Block):
    """The predicate does not apply to a turn whose source item has this field false."""

    field: str = Field(pattern=_NAME)
    code: str = Field(pattern=_NAME)


class TurnRule(_Block):
    """These predicates on turns of ``role`` (every role when omitted) of cases matching ``where``."""

    predicates: list[str] = Field(min_length=1)
    role: str | None = Field(default=None, pattern=_NAME)
    where: dict[str, list[str]] = Field(default_factory=dict, description="Case field → accepted values.")
    unless: dict[str, NotApplicableUnless] = Field(default_factory=dict)
    only_if_listed_in: str | None = Field(
        default=None, pattern=_NAME, description="A case field listing which of these predicates apply to it."
    )
    case_rows: CaseRows | None = None


class CaseRule(_Block):
    """Case-level rows: registered case predicates, or a case's listed predicates all holding."""

    predicates: list[str] = Field(default_factory=list)
    all_listed_in: str | None = Field(
        default=None, pattern=_NAME, description="A case field listing turn predicates that must all hold."
    )
    where: dict[str, list[str]] = Field(default_factory=dict)
    severity: CaseSeverity

    @model_validator(mode="after")
    def _one_source(self) -> CaseRule:
        if bool(self.predicates) == (self.all_listed_in is not None):
            raise ValueError("a case rule has either predicates or all_listed_in")
        return self


class MetricSpec(_Block):
    """One metric: exactly one of rate, failure_rate, count, all_of."""

    rate: str | None = Field(default=None, description="Passed / applicable rows of this predicate.")
    failure_rate: str | None = Field(default=None, description="Failed / applicable rows of this predicate.")
    count: Literal["cases", "turns"] | None = None
    all_of: list[str] | None = Field(
        default=None, min_length=1, description="1.0 when every listed metric meets its threshold."
    )
    over: Literal["cases", "turns"] = Field(
        default="cases", description="Rows of case_predicates (cases) or turn_predicates (turns)."
    )
    where: dict[str, list[str]] = Field(default_factory=dict, description="Only cases whose field is one of.")

    @model_validator(mode="after")
    def _one_kind(self) -> MetricSpec:
        chosen = [k for k in ("rate", "failure_rate", "count", "all_of") if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(f"a metric is exactly one of rate, failure_rate, count, all_of; got {chosen}")
        return self

    @property
    def predicate(self) -> str | None:
        return self.rate or self.failure_rate


class Declaration(_Block):
    """Everything a declared lane says about its cases, threads, predicates and metrics."""

    case_schema: CaseSchema
    threads: Threads
    turn_predicates: list[TurnRule] = Field(default_factory=list)
    case_predicates: list[CaseRule] = Field(default_factory=list)
    metrics: dict[str, MetricSpec] = Field(min_length=1)
