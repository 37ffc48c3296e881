"""Warm-session predicates (the warmed_session_consistency lane).

In one long-lived session the same prompt comes back: does the answer stay whole (no
placeholder), match what the runtime logged for that turn (``telemetry_match``), and keep the
grounding it had (``grounded_holds_on_warm``, ``grounding_stable``)? A runtime reports its
turn log through the adapter boundary as ``turn_log_surface`` in the turn's raw fields.
evals/warmed_session_consistency/contract.md records the choices made here.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.predicates.base import TURN_ERROR, TurnView, Verdict, thread_turn_predicate, turn_predicate
from eval_pipeline.predicates.explain import excerpt
from eval_pipeline.predicates.thread import not_walk_fragment

WARM_PLACEHOLDERS: tuple[str, ...] = ("...", "<pending>", "<prior>", " placeholder ")
TELEMETRY_FIELD = "turn_log_surface"
ANCHORING_SOURCES: frozenset[str] = frozenset({"pack", "teaching"})
LOST_SOURCES: frozenset[str] = frozenset({"none", "vault"})


def same_prompt(a: TurnView, b: TurnView) -> bool:
    """Two turns ask the same prompt (whitespace and case aside)."""
    return " ".join((a.prompt or "").split()).casefold() == " ".join((b.prompt or "").split()).casefold()


def source(turn: TurnView) -> str:
    return TURN_ERROR if turn.error is not None else (turn.grounding_source or "none").lower()


@turn_predicate("no_warm_placeholder")
def no_warm_placeholder(turn: TurnView) -> Verdict:
    """The surface contains none of ``...``, ``<pending>``, ``<prior>``, `` placeholder ``."""
    found = [marker for marker in WARM_PLACEHOLDERS if marker in f" {turn.surface} "]
    return (
        Verdict.fail("placeholder_present", found=found, excerpt=excerpt(turn.surface, found[0].strip()))
        if found
        else Verdict.ok()
    )


@turn_predicate("telemetry_match")
def telemetry_match(turn: TurnView) -> Verdict:
    """The surface equals the one the runtime's own turn log recorded; null without telemetry."""
    logged = turn.raw.get(TELEMETRY_FIELD)
    if not isinstance(logged, str):
        return Verdict.not_applicable("no_telemetry")
    if logged == turn.surface:
        return Verdict.ok()
    return Verdict.fail("telemetry_mismatch", logged=logged[:200], surface=turn.surface[:200])


@thread_turn_predicate("grounded_holds_on_warm", reads=("grounding_source",))
def grounded_holds_on_warm(turns: Sequence[TurnView], index: int) -> Verdict:
    """A repeat of a prompt first grounded in pack/teaching is not none, vault or a fragment.

    Null on a prompt's first ask, and when its first ask was not pack/teaching-grounded.
    """
    turn = turns[index]
    first = next((t for t in turns[:index] if same_prompt(t, turn)), None)
    if first is None:
        return Verdict.not_applicable("first_ask")
    if source(first) not in ANCHORING_SOURCES:
        return Verdict.not_applicable("first_ask_not_grounded", first_source=source(first))
    if source(turn) in LOST_SOURCES:
        return Verdict.fail("grounding_lost", first_source=source(first), source=source(turn))
    if not_walk_fragment(turn).passed is False:
        return Verdict.fail(
            "fragment_on_warm", first_source=source(first), source=source(turn), excerpt=excerpt(turn.surface)
        )
    return Verdict.ok(first_source=source(first), source=source(turn))


@thread_turn_predicate("grounding_stable", reads=("grounding_source",))
def grounding_stable(turns: Sequence[TurnView], index: int) -> Verdict:
    """On a prompt's first ask, when it is asked again: every ask has the same grounding source.

    Null on every other turn, so the rate counts repeated prompts, not turns.
    """
    turn = turns[index]
    if any(same_prompt(t, turn) for t in turns[:index]):
        return Verdict.not_applicable("repeat")
    asks = [t for t in turns[index:] if same_prompt(t, turn)]
    if len(asks) < 2:
        return Verdict.not_applicable("asked_once")
    sources = [source(t) for t in asks]
    if len(set(sources)) == 1:
        return Verdict.ok(sources=sources)
    return Verdict.fail("grounding_changed", sources=sources)
