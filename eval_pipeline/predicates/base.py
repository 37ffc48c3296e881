"""What a predicate returns, what it looks at, and the registry that finds it by name.

Predicates are pure functions: of one turn (``@turn_predicate``), of one turn seen within its
thread (``@thread_turn_predicate``) or of a whole case (``@case_predicate``). Each returns a
:class:`Verdict`: passed (or None when the predicate does not apply), a machine-stable code,
and the smallest evidence that explains the verdict. A turn whose runtime call failed fails
every turn predicate that applies to it, with code ``turn_error``. Every module of this
package is imported on the first lookup, so a new predicate is a decorated function in a
module here: nothing else to register.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from eval_pipeline.core import Registry

PASS = "ok"
TURN_ERROR = "turn_error"
# The code of a row whose predicate reads telemetry the runtime never supplied (see telemetry.py).
TELEMETRY_NOT_SUPPLIED = "telemetry_not_supplied"


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
    def markers_found(markers: list[str], missing_code: str, **evidence: Any) -> Verdict:
        """Passes with the markers a surface carries; fails with ``missing_code`` (and ``evidence``,
        e.g. the excerpt a reason quotes) when there are none."""
        return Verdict.ok(markers=markers) if markers else Verdict.fail(missing_code, **evidence)

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
    prompt: str | None = None
    # What else the runtime reported for this turn (the transcript's ``raw`` JSON), e.g. telemetry.
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_values(
        cls,
        *,
        surface: str | None,
        grounding_source: str | None,
        surface_tag: str | None,
        error: str | None,
        prompt: str | None,
        raw: str | None,
    ) -> TurnView:
        """A view of one transcript row's values (nulls as None, ``raw`` as its JSON text)."""
        return cls(surface or "", grounding_source, surface_tag, error, prompt, _raw(raw))


# The transcript columns a TurnView is built from.
TURN_VIEW_COLUMNS: tuple[str, ...] = ("surface", "grounding_source", "surface_tag", "error", "prompt", "raw")


def _raw(text: str | None) -> Mapping[str, Any]:
    if not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


TurnPredicate = Callable[[TurnView], Verdict]
# Judges turn ``index`` of a case's recorded turns, seeing the whole thread (e.g. a repeated prompt).
ThreadTurnPredicate = Callable[[Sequence[TurnView], int], Verdict]
# Judges a whole case: the validated case and its recorded turns, in order.
CasePredicate = Callable[[Any, Sequence[TurnView]], Verdict]
PredicateLevel = Literal["turn", "thread_turn", "case"]


@dataclass(frozen=True)
class Predicate:
    """A registered predicate: its name, what it looks at, and the function.

    ``explain`` turns a case-level verdict into the case row's message (default:
    :func:`eval_pipeline.predicates.explain.reason`). ``reads`` names the runtime telemetry it
    reads, declared where it is registered.
    """

    name: str
    level: PredicateLevel
    function: Callable[..., Verdict]
    explain: Callable[[str, Verdict], str] | None = None
    # The answer fields besides the surface it reads, which only some runtimes supply
    # (``grounding_source``, ``surface_tag``): runtime telemetry. A plain LLM supplies none.
    reads: tuple[str, ...] = ()

    def on_turn(self, turns: Sequence[TurnView], index: int) -> Verdict:
        """The verdict for turn ``index`` (turn and thread_turn predicates)."""
        if self.level == "turn":
            return cast(TurnPredicate, self.function)(turns[index])
        return cast(ThreadTurnPredicate, self.function)(turns, index)


PREDICATES: Registry[Predicate] = Registry("predicate", "eval_pipeline.predicates")


def _guard_turn(fn: Callable[[TurnView], Verdict]) -> Callable[[TurnView], Verdict]:
    def guarded(turn: TurnView) -> Verdict:
        if turn.error is not None:
            return Verdict.fail(TURN_ERROR, error=turn.error)
        return fn(turn)

    guarded.__name__ = fn.__name__
    guarded.__doc__ = fn.__doc__
    return guarded


def turn_predicate(name: str, *, reads: tuple[str, ...] = ()) -> Callable[[TurnPredicate], TurnPredicate]:
    """Register a predicate of one turn under ``name`` (reading the telemetry fields ``reads``).
    A faulted turn fails it with ``turn_error``."""

    def decorate(fn: TurnPredicate) -> TurnPredicate:
        guarded = _guard_turn(fn)
        PREDICATES.add(name, Predicate(name, "turn", guarded, reads=reads))
        return guarded

    return decorate


def thread_turn_predicate(
    name: str, *, reads: tuple[str, ...] = ()
) -> Callable[[ThreadTurnPredicate], ThreadTurnPredicate]:
    """Register a predicate of one turn that also sees the thread's other turns.

    A faulted turn fails it with ``turn_error``.
    """

    def decorate(fn: ThreadTurnPredicate) -> ThreadTurnPredicate:
        def guarded(turns: Sequence[TurnView], index: int) -> Verdict:
            if turns[index].error is not None:
                return Verdict.fail(TURN_ERROR, error=turns[index].error)
            return fn(turns, index)

        guarded.__name__ = fn.__name__
        guarded.__doc__ = fn.__doc__
        PREDICATES.add(name, Predicate(name, "thread_turn", guarded, reads=reads))
        return guarded

    return decorate


def case_predicate(
    name: str, *, explain: Callable[[str, Verdict], str] | None = None, reads: tuple[str, ...] = ()
) -> Callable[[CasePredicate], CasePredicate]:
    """Register a predicate of a whole case (the case and its recorded turns) under ``name``."""

    def decorate(fn: CasePredicate) -> CasePredicate:
        PREDICATES.add(name, Predicate(name, "case", fn, explain, reads=reads))
        return fn

    return decorate


def get_turn_predicate(name: str) -> TurnPredicate:
    """The single-turn predicate ``name``."""
    predicate = PREDICATES.get(name)
    if predicate.level != "turn":
        raise KeyError(f"predicate {name!r} is a {predicate.level} predicate, not a turn predicate")
    return cast(TurnPredicate, predicate.function)


# A case check validates part of a case beyond field types (a lane's case schema names it):
# it returns the value, or raises ValueError saying what is wrong.
CaseCheck = Callable[[Any], Any]
CASE_CHECKS: Registry[CaseCheck] = Registry("case check", "eval_pipeline.predicates")


def case_check(name: str) -> Callable[[CaseCheck], CaseCheck]:
    """Register a case-schema check under ``name`` (``checks:`` in a lane's ``case_schema``)."""
    return CASE_CHECKS.register(name)
