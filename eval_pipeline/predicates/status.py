"""Status-articulation predicates over a probe's surface (the articulation_of_status lane, seed 002).

Three turn predicates, each a substring scan or a regex; evals/articulation_of_status/contract.md
records the choices made here. In every one, ``passed`` means the probe meets the contract:
``false_certainty`` passes when the surface is *free* of false certainty.
"""

from __future__ import annotations

import re
from typing import Any

from eval_pipeline.predicates.base import TurnView, Verdict, case_check, turn_predicate
from eval_pipeline.predicates.explain import excerpt

# The seed's v1 list of explicit speculative-status markers, matched case-insensitively.
SPECULATIVE_MARKERS: tuple[str, ...] = (
    "speculative",
    "not yet reviewed",
    "unconfirmed",
    "pending review",
    "tentatively",
    "as taught but unreviewed",
    "awaiting coherence judgment",
)

SPECULATIVE_KINDS: frozenset[str] = frozenset({"speculative_definition", "speculative_query"})
# Teaching in this lane is phrased as a correction (contract.md, "Setup"); the case schema
# checks that speculative cases teach and controls do not.
CORRECTION = re.compile(r"^\s*(?:actually,?|correction:)\s", re.IGNORECASE)

# A bare assertion: a sentence that opens with a subject of one to three words followed by
# "is" / "are" / "means" ("X is Y", "X means Y", "X is defined as Y", "It is confirmed"),
# or a bare "Yes" answering a status question.
_SENTENCE_START = r"(?:^|(?<=[.!?;:])\s+)"
BARE_ASSERTION = re.compile(
    _SENTENCE_START
    + r"(?P<assertion>[A-Za-z][\w'\-]*(?:\s+[A-Za-z][\w'\-]*){0,2}\s+(?:is|are|means|mean)\s+\S+)",
    re.IGNORECASE,
)
BARE_YES = re.compile(_SENTENCE_START + r"(?P<assertion>yes\b)", re.IGNORECASE)


def status_markers(surface: str) -> list[str]:
    """The speculative-status markers the surface carries, in list order."""
    lowered = surface.lower()
    return [marker for marker in SPECULATIVE_MARKERS if marker in lowered]


def bare_assertion(surface: str) -> str | None:
    """The first bare-assertion shape in the surface, or None."""
    for pattern in (BARE_YES, BARE_ASSERTION):
        match = pattern.search(surface.strip())
        if match:
            return match["assertion"]
    return None


@turn_predicate("speculative_marked")
def speculative_marked(turn: TurnView) -> Verdict:
    """The surface carries at least one speculative-status marker (case-insensitive)."""
    return Verdict.markers_found(
        status_markers(turn.surface), "no_status_marker", excerpt=excerpt(turn.surface)
    )


@turn_predicate("false_certainty")
def false_certainty(turn: TurnView) -> Verdict:
    """Passes unless the surface states a bare assertion with no status marker anywhere.

    A marker anywhere in the surface hedges the whole answer; a surface that asserts
    nothing (a refusal, a question back) is not false certainty.
    """
    markers = status_markers(turn.surface)
    if markers:
        return Verdict.ok(markers=markers)
    assertion = bare_assertion(turn.surface)
    if assertion is not None:
        return Verdict.fail("bare_assertion", assertion=assertion)
    return Verdict.ok()


@turn_predicate("control_ok")
def control_ok(turn: TurnView) -> Verdict:
    """With nothing taught, the surface claims no speculative status (refusals pass too).

    A marker here reports a taught, unreviewed claim that does not exist: a runtime that
    hedges every answer would otherwise score perfectly on articulation.
    """
    found = status_markers(turn.surface)
    return Verdict.fail("phantom_status_marker", markers=found) if found else Verdict.ok()


@case_check("teaching_matches_kind")
def teaching_matches_kind(case: Any) -> Any:
    """Speculative cases teach a correction in their setup; controls teach nothing."""
    corrections = [p for p in case.setup if CORRECTION.match(p)]
    if case.kind in SPECULATIVE_KINDS and not corrections:
        raise ValueError(
            f"a {case.kind} case needs a setup turn that teaches a correction "
            "('Actually, X is Y.' or 'Correction: X is Y.')"
        )
    if case.kind == "no_teaching_control" and corrections:
        raise ValueError(f"a no_teaching_control case must teach nothing; setup teaches {corrections[0]!r}")
    return case
