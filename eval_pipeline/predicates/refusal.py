"""Refusal-calibration predicates over a probe's surface (the refusal_calibration lane).

``refused``: the surface says plainly that it cannot ground the answer. ``no_fabrication``:
it does not give a confident definition it cannot ground (a refusal never counts as one).
``answered``: a probe the runtime can ground gets a non-empty answer, not a refusal.
evals/refusal_calibration/contract.md records the markers and the definitional shapes.
"""

from __future__ import annotations

import re

from eval_pipeline.predicates.base import TurnView, Verdict, turn_predicate
from eval_pipeline.predicates.explain import excerpt

REFUSAL_MARKERS: tuple[str, ...] = (
    "i do not know",
    "i don't know",
    "unknown",
    "not in scope",
    "insufficient grounding",
    "no recall",
    "cannot answer",
    "not grounded",
)
DEFINITIONAL = re.compile(r"\b(?:is defined as|means|is a|is the)\b", re.IGNORECASE)


def refusal_markers(surface: str) -> list[str]:
    """The refusal markers the surface carries (case-insensitive; a typographic apostrophe counts)."""
    lowered = surface.lower().replace("’", "'")
    return [marker for marker in REFUSAL_MARKERS if marker in lowered]


@turn_predicate("refused")
def refused(turn: TurnView) -> Verdict:
    """The surface carries at least one refusal marker."""
    return Verdict.markers_found(refusal_markers(turn.surface), "no_refusal", excerpt=excerpt(turn.surface))


@turn_predicate("no_fabrication")
def no_fabrication(turn: TurnView) -> Verdict:
    """Passes unless the surface has a definitional shape and is not a refusal."""
    if refusal_markers(turn.surface):
        return Verdict.ok()
    match = DEFINITIONAL.search(turn.surface)
    return (
        Verdict.fail(
            "fabricated_definition", shape=match.group(0), excerpt=excerpt(turn.surface, match.group(0))
        )
        if match
        else Verdict.ok()
    )


@turn_predicate("answered")
def answered(turn: TurnView) -> Verdict:
    """The surface is non-empty and not a refusal."""
    if not turn.surface.strip():
        return Verdict.fail("empty_answer")
    found = refusal_markers(turn.surface)
    return (
        Verdict.fail("refused_groundable", markers=found, excerpt=excerpt(turn.surface, found[0]))
        if found
        else Verdict.ok()
    )
