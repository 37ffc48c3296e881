"""What a predicate returns, what it looks at, and the registry that finds it by name.

Predicates are pure functions of one turn. Each returns a :class:`Verdict`: passed (or
None when the predicate does not apply), a machine-stable code, and the smallest evidence
that explains the verdict. A turn whose runtime call failed fails every predicate that
applies to it, with code ``turn_error``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

PASS = "ok"
TURN_ERROR = "turn_error"


@dataclass(frozen=True)
class Verdict:
    passed: bool | None
    code: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def ok(**evidence: Any) -> Verdict:
        return Verdict(True, PASS, evidence)

    @staticmethod
    def fail(code: str, **evidence: Any) -> Verdict:
        return Verdict(False, code, evidence)

    @staticmethod
    def not_applicable(code: str = "not_applicable", **evidence: Any) -> Verdict:
        return Verdict(None, code, evidence)


@dataclass(frozen=True)
class TurnView:
    """The parts of a transcript row that predicates read."""

    surface: str
    grounding_source: str | None = None
    surface_tag: str | None = None
    error: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> TurnView:
        def text(name: str) -> str | None:
            value = row.get(name)
            return None if value is None or pd.isna(value) else str(value)

        return cls(
            surface=text("surface") or "",
            grounding_source=text("grounding_source"),
            surface_tag=text("surface_tag"),
            error=text("error"),
        )


TurnPredicate = Callable[[TurnView], Verdict]

_TURN_PREDICATES: dict[str, TurnPredicate] = {}


def turn_predicate(name: str) -> Callable[[TurnPredicate], TurnPredicate]:
    """Register a turn predicate under ``name``. A faulted turn fails it with ``turn_error``."""

    def decorate(fn: TurnPredicate) -> TurnPredicate:
        if name in _TURN_PREDICATES:
            raise ValueError(f"turn predicate {name!r} registered twice")

        def guarded(turn: TurnView) -> Verdict:
            if turn.error is not None:
                return Verdict.fail(TURN_ERROR, error=turn.error)
            return fn(turn)

        guarded.__name__ = fn.__name__
        guarded.__doc__ = fn.__doc__
        _TURN_PREDICATES[name] = guarded
        return guarded

    return decorate


def get_turn_predicate(name: str) -> TurnPredicate:
    try:
        return _TURN_PREDICATES[name]
    except KeyError:
        raise KeyError(f"unknown turn predicate {name!r}; known: {sorted(_TURN_PREDICATES)}") from None


def turn_predicate_names() -> list[str]:
    return sorted(_TURN_PREDICATES)
