"""Thread-coherence predicates (the conversational_thread_coherence lane, seed 003).

Per turn: ``is_grounded``, ``not_walk_fragment``, ``length_adequate`` (and the shared
``no_placeholder`` from :mod:`surface`). Per case: :func:`topic_anchor_present` and
:func:`no_topic_drift_to_none`, pure functions over a case's turns. Every choice is
recorded in evals/conversational_thread_coherence/contract.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline.predicates.base import (
    TURN_ERROR,
    TurnView,
    Verdict,
    case_check,
    case_predicate,
    turn_predicate,
)
from eval_pipeline.predicates.columns import TurnColumns, VerdictColumns, once_per_key, vectorised
from eval_pipeline.predicates.explain import excerpt
from eval_pipeline.predicates.surface import (
    finite_verb_tokens,
    words,
)

GROUNDED_SOURCES: frozenset[str] = frozenset({"pack", "teaching", "vault", "oov", "partial"})
# Sources after which a turn on the same prompt-subject must not fall back to `none`.
ANCHORING_SOURCES: frozenset[str] = frozenset({"pack", "teaching"})
MIN_ALPHA_TOKENS = 4
MIN_SURFACE_CHARS = 20

_POINTER = r"[\"“'‘]?(?:that|it|this|they|those|these)[\"”'’]?"
_CANNOT = r"(?:cannot|can ?not|can't|could not|couldn't|do not|don't|am unable to|am not able to)"
# The explicit ways a surface may say it cannot resolve an anaphoric reference. A clarifying
# question on its own ("Which word do you mean?") does not count: it does not say the
# reference failed.
DISCLOSURE_SHAPES: dict[str, re.Pattern[str]] = {
    "cannot_tell_referent": re.compile(
        rf"\b{_CANNOT}\s+(?:tell|work\s+out|determine|know|see)\s+what\s+{_POINTER}\s+refers?\s+to\b",
        re.IGNORECASE,
    ),
    "unsure_of_referent": re.compile(
        rf"\b(?:not\s+sure|unsure|unclear)\s+what\s+{_POINTER}\s+refers?\s+to\b", re.IGNORECASE
    ),
    "cannot_resolve_reference": re.compile(
        rf"\b{_CANNOT}\s+resolve\s+(?:the|that|this|your|which)\s+(?:reference|referent)\b", re.IGNORECASE
    ),
    "no_prior_subject": re.compile(
        r"\bno\s+(?:earlier|prior|previous)\s+(?:subject|topic)\b.{0,40}\brefer", re.IGNORECASE | re.DOTALL
    ),
}


def reference_disclosure(surface: str) -> str | None:
    """The name of the first disclosure shape the surface matches, or None."""
    for name, pattern in DISCLOSURE_SHAPES.items():
        if pattern.search(surface):
            return name
    return None


def mentions_lemma(surface: str, lemma: str) -> bool:
    """The surface names ``lemma`` as a whole word (case-insensitive; a plain plural counts)."""
    body = r"\s+".join(re.escape(part) for part in lemma.split())
    return re.search(rf"\b{body}(?:s|es)?\b", surface, re.IGNORECASE) is not None


@turn_predicate("is_grounded", reads=("grounding_source",))
def is_grounded(turn: TurnView) -> Verdict:
    """``grounding_source`` is one of pack, teaching, vault, oov, partial (missing counts as none)."""
    source = (turn.grounding_source or "none").lower()
    if source in GROUNDED_SOURCES:
        return Verdict.ok(grounding_source=source)
    return Verdict.fail("ungrounded", grounding_source=source)


@turn_predicate("not_walk_fragment")
def not_walk_fragment(turn: TurnView) -> Verdict:
    """At least four alphabetic tokens and at least one finite verb form."""
    tokens = words(turn.surface)
    verbs = finite_verb_tokens(turn.surface)
    if len(tokens) < MIN_ALPHA_TOKENS:
        return Verdict.fail("too_few_words", words=len(tokens), excerpt=excerpt(turn.surface))
    if not verbs:
        return Verdict.fail("no_finite_verb", words=len(tokens), excerpt=excerpt(turn.surface))
    return Verdict.ok(words=len(tokens), verbs=verbs[:5])


@turn_predicate("length_adequate")
def length_adequate(turn: TurnView) -> Verdict:
    """The stripped surface is at least twenty characters long."""
    length = len(turn.surface.strip())
    return (
        Verdict.ok(chars=length)
        if length >= MIN_SURFACE_CHARS
        else Verdict.fail("too_short", chars=length, excerpt=excerpt(turn.surface))
    )


# --- two of them over a batch of answered turns (the scalar forms above are the reference;
# not_walk_fragment's is in word_columns, with finite_predicate_shape's) ---


@vectorised("is_grounded")
def is_grounded_columns(turns: TurnColumns) -> VerdictColumns:
    """A run's answers name few grounding sources, and the source decides the verdict."""
    return once_per_key("is_grounded", turns, turns.grounding_source)


@vectorised("length_adequate")
def length_adequate_columns(turns: TurnColumns) -> VerdictColumns:
    """A passing length decides the verdict (a short surface's evidence quotes it)."""
    lengths = [len(surface.strip()) for surface in turns.surface]
    keys = [length if length >= MIN_SURFACE_CHARS else -index - 1 for index, length in enumerate(lengths)]
    return once_per_key("length_adequate", turns, keys)


@dataclass(frozen=True)
class ThreadTurnView:
    """One recorded turn of a thread with the case's annotations for it."""

    turn_index: int
    turn: TurnView
    anaphora_anchor_to: str | None = None
    is_replay_of_prompt_at_turn: int | None = None


def topic_anchor_present(turns: Sequence[ThreadTurnView]) -> Verdict:
    """Every anaphoric turn names its anchor's lemma or discloses it cannot resolve the reference.

    Not applicable when the case has no anaphoric turn. A missing or faulted turn fails.
    """
    anaphoric = [t for t in turns if t.anaphora_anchor_to is not None]
    if not anaphoric:
        return Verdict.not_applicable("no_anaphora")
    failing: list[dict[str, object]] = []
    outcomes: list[dict[str, object]] = []
    for item in anaphoric:
        anchor = str(item.anaphora_anchor_to)
        if item.turn.error is not None:
            failing.append({"turn_index": item.turn_index, "anchor": anchor, "code": TURN_ERROR})
            continue
        if mentions_lemma(item.turn.surface, anchor):
            outcomes.append({"turn_index": item.turn_index, "anchor": anchor, "how": "names_anchor"})
            continue
        disclosure = reference_disclosure(item.turn.surface)
        if disclosure is not None:
            outcomes.append({"turn_index": item.turn_index, "anchor": anchor, "how": disclosure})
            continue
        failing.append({"turn_index": item.turn_index, "anchor": anchor, "code": "anchor_missing"})
    if failing:
        return Verdict.fail("anchor_missing", failing=failing, passing=outcomes)
    return Verdict.ok(passing=outcomes)


def no_topic_drift_to_none(turns: Sequence[ThreadTurnView]) -> Verdict:
    """No replay of a prompt falls to ``none`` after that prompt-subject was pack/teaching-grounded.

    A turn with ``is_replay_of_prompt_at_turn = k`` is on the same prompt-subject as turn k
    and every other replay of k. A replay is checked when an earlier turn of its group was
    grounded in pack or teaching; it drifts when its own source is none (or missing, or the
    turn faulted). Not applicable when no replay has such an anchor.
    """
    checked: list[int] = []
    drifted: list[dict[str, object]] = []
    for item in sorted(turns, key=lambda t: t.turn_index):
        origin = item.is_replay_of_prompt_at_turn
        if origin is None:
            continue
        group = [
            t
            for t in turns
            if t.turn_index < item.turn_index
            and (t.turn_index == origin or t.is_replay_of_prompt_at_turn == origin)
        ]
        anchors = [t.turn_index for t in group if _source(t) in ANCHORING_SOURCES]
        if not anchors:
            continue
        checked.append(item.turn_index)
        if item.turn.error is not None or _source(item) == "none":
            drifted.append(
                {
                    "turn_index": item.turn_index,
                    "replay_of": origin,
                    "grounded_at": anchors,
                    "source": _source(item),
                }
            )
    if not checked:
        return Verdict.not_applicable("no_grounded_replay")
    if drifted:
        return Verdict.fail("drift_to_none", drifted=drifted, checked=checked)
    return Verdict.ok(checked=checked)


def _source(item: ThreadTurnView) -> str:
    if item.turn.error is not None:
        return TURN_ERROR
    return (item.turn.grounding_source or "none").lower()


def annotated(case: Any, turns: Sequence[TurnView]) -> list[ThreadTurnView]:
    """A thread case's recorded turns with the case's annotation of each (``case.turns``)."""
    return [
        ThreadTurnView(
            turn_index=index,
            turn=turn,
            anaphora_anchor_to=getattr(annotation, "anaphora_anchor_to", None),
            is_replay_of_prompt_at_turn=getattr(annotation, "is_replay_of_prompt_at_turn", None),
        )
        for index, (annotation, turn) in enumerate(zip(case.turns, turns, strict=True))
    ]


@case_predicate("topic_anchor_present")
def case_topic_anchor_present(case: Any, turns: Sequence[TurnView]) -> Verdict:
    return topic_anchor_present(annotated(case, turns))


@case_predicate("no_topic_drift_to_none", reads=("grounding_source",))
def case_no_topic_drift_to_none(case: Any, turns: Sequence[TurnView]) -> Verdict:
    return no_topic_drift_to_none(annotated(case, turns))


@case_check("annotations_point_backwards")
def annotations_point_backwards(turns: list[Any]) -> list[Any]:
    """Anchors name an earlier subject; replays point at an earlier, original turn on the same subject."""
    problems: list[str] = []
    earlier: set[Any] = set()  # the subject lemmas of the turns before this one
    for index, turn in enumerate(turns):
        if index:
            earlier.add(turns[index - 1].subject_lemma)
        anchor = turn.anaphora_anchor_to
        if anchor is not None:
            if anchor not in earlier:
                problems.append(
                    f"turns[{index}].anaphora_anchor_to: {anchor!r} is not the subject_lemma of an earlier turn"
                )
            if turn.subject_lemma is not None and turn.subject_lemma != anchor:
                problems.append(
                    f"turns[{index}].subject_lemma: {turn.subject_lemma!r} differs from its anchor {anchor!r}"
                )
        origin = turn.is_replay_of_prompt_at_turn
        if origin is not None:
            if origin >= index:
                problems.append(
                    f"turns[{index}].is_replay_of_prompt_at_turn: {origin} is not an earlier turn (expected 0..{index - 1})"
                )
                continue
            source = turns[origin]
            if source.is_replay_of_prompt_at_turn is not None:
                problems.append(
                    f"turns[{index}].is_replay_of_prompt_at_turn: turn {origin} is itself a replay; "
                    f"point at the original turn {source.is_replay_of_prompt_at_turn}"
                )
            if source.subject_lemma != turn.subject_lemma:
                problems.append(
                    f"turns[{index}].subject_lemma: a replay must share turn {origin}'s subject_lemma "
                    f"({source.subject_lemma!r}), got {turn.subject_lemma!r}"
                )
    if problems:
        raise ValueError("; ".join(problems))
    return turns
