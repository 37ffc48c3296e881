"""Both sides of every status and thread predicate."""

from __future__ import annotations

import pytest

from eval_pipeline.predicates import TurnView, get_turn_predicate
from eval_pipeline.predicates.thread import (
    DISCLOSURE_SHAPES,
    ThreadTurnView,
    no_topic_drift_to_none,
    reference_disclosure,
    topic_anchor_present,
)


def turn(surface: str, source: str | None = "pack", error: str | None = None) -> TurnView:
    return TurnView(surface=surface, grounding_source=source, error=error)


def check(name: str, surface: str, source: str | None = "pack") -> bool | None:
    return get_turn_predicate(name)(turn(surface, source)).passed


@pytest.mark.parametrize(
    "surface",
    ["(speculative, not yet reviewed) Wisdom is owls.", "This is UNCONFIRMED.", "Tentatively, yes."],
)
def test_speculative_marked_finds_a_marker(surface: str) -> None:
    assert check("speculative_marked", surface) is True


def test_speculative_marked_fails_without_marker() -> None:
    verdict = get_turn_predicate("speculative_marked")(turn("Wisdom is the love of owls."))
    assert (verdict.passed, verdict.code) == (False, "no_status_marker")


@pytest.mark.parametrize(
    ("surface", "assertion"),
    [
        ("Wisdom is the love of owls.", "Wisdom is the"),
        ("Sure. Florbid means too bright to look at.", "Florbid means too"),
        ("Justice is defined as repair.", "Justice is defined"),
        ("Yes, that has been checked.", "Yes"),
        ("It is confirmed.", "It is confirmed."),
    ],
)
def test_false_certainty_catches_bare_assertions(surface: str, assertion: str) -> None:
    verdict = get_turn_predicate("false_certainty")(turn(surface))
    assert (verdict.passed, verdict.code, verdict.evidence["assertion"]) == (
        False,
        "bare_assertion",
        assertion,
    )


@pytest.mark.parametrize(
    "surface",
    [
        "(speculative, not yet reviewed) Wisdom is the love of owls.",
        "Wisdom is the love of owls, pending review.",
        "I do not know that word yet.",
    ],
)
def test_false_certainty_passes_hedged_or_non_assertive_surfaces(surface: str) -> None:
    assert check("false_certainty", surface) is True


def test_control_ok_accepts_answers_and_refusals_but_not_phantom_markers() -> None:
    assert check("control_ok", "Truth is the property a claim has when it matches how things are.") is True
    assert check("control_ok", "I cannot say what causes that without guessing.", "none") is True
    verdict = get_turn_predicate("control_ok")(turn("(speculative, not yet reviewed) Truth is fit."))
    assert (verdict.passed, verdict.code) == (False, "phantom_status_marker")


def test_a_faulted_probe_fails_every_status_predicate() -> None:
    for name in ("speculative_marked", "false_certainty", "control_ok"):
        assert get_turn_predicate(name)(turn("", error="Timeout")).code == "turn_error"


@pytest.mark.parametrize(
    ("source", "passed"), [("pack", True), ("oov", True), ("partial", True), ("none", False), (None, False)]
)
def test_is_grounded(source: str | None, passed: bool) -> None:
    assert check("is_grounded", "Some surface text here.", source) is passed


@pytest.mark.parametrize(
    ("surface", "passed", "code"),
    [
        ("Wisdom is good judgment.", True, "ok"),
        ("Wisdom, judgment, experience.", False, "too_few_words"),
        ("meta virtue wisdom cognition judgment", False, "no_finite_verb"),
    ],
)
def test_not_walk_fragment(surface: str, passed: bool, code: str) -> None:
    verdict = get_turn_predicate("not_walk_fragment")(turn(surface))
    assert (verdict.passed, verdict.code) == (passed, code)


def test_length_adequate_is_twenty_stripped_characters() -> None:
    assert check("length_adequate", "  " + "x" * 20 + "  ") is True
    assert check("length_adequate", "  " + "x" * 19 + "  ") is False


def view(
    index: int, surface: str, source: str = "pack", *, anchor: str | None = None, replay: int | None = None
) -> ThreadTurnView:
    return ThreadTurnView(
        index, turn(surface, source), anaphora_anchor_to=anchor, is_replay_of_prompt_at_turn=replay
    )


def test_topic_anchor_names_the_anchor_or_discloses() -> None:
    named = [
        view(0, "Wisdom is judgment."),
        view(1, "Still on WISDOM: it draws on knowledge.", anchor="wisdom"),
    ]
    plural = [view(0, "x"), view(1, "Volcanoes are not in my pack.", anchor="volcano")]
    disclosed = [view(0, "x"), view(1, 'I cannot tell what "that" refers to.', "none", anchor="wisdom")]
    assert topic_anchor_present(named).passed is True
    assert topic_anchor_present(plural).passed is True
    assert topic_anchor_present(disclosed).evidence["passing"][0]["how"] == "cannot_tell_referent"


def test_topic_anchor_fails_on_a_wrong_subject_or_a_bare_clarifying_question() -> None:
    wrong = [view(0, "x"), view(1, "Memory keeps the past available.", anchor="wisdom")]
    question = [view(0, "x"), view(1, "Which word do you mean?", "none", anchor="wisdom")]
    for turns in (wrong, question):
        verdict = topic_anchor_present(turns)
        assert (verdict.passed, verdict.evidence["failing"][0]["turn_index"]) == (False, 1)


def test_topic_anchor_is_null_without_anaphora() -> None:
    assert topic_anchor_present([view(0, "Wisdom is judgment.")]).passed is None


@pytest.mark.parametrize(
    ("surface", "shape"),
    [
        ("I don't know what it refers to.", "cannot_tell_referent"),
        ("I am not sure what “this” refers to here.", "unsure_of_referent"),
        ("Sorry, I can't resolve the reference.", "cannot_resolve_reference"),
        ("There is no earlier subject for that to refer to.", "no_prior_subject"),
        ("Which word do you mean?", None),
        ("I could not find a concept to talk about in that message.", None),
    ],
)
def test_each_disclosure_shape(surface: str, shape: str | None) -> None:
    assert reference_disclosure(surface) == shape
    assert shape is None or shape in DISCLOSURE_SHAPES


def test_drift_after_a_grounded_turn_fails() -> None:
    turns = [view(0, "a", "pack"), view(1, "b", "pack"), view(2, "c", "none", replay=0)]
    verdict = no_topic_drift_to_none(turns)
    assert (verdict.passed, verdict.evidence["drifted"][0]["grounded_at"]) == (False, [0])


def test_a_replay_that_stays_grounded_passes() -> None:
    turns = [view(0, "a", "pack"), view(1, "b", "none"), view(2, "c", "partial", replay=0)]
    assert no_topic_drift_to_none(turns).passed is True


def test_drift_counts_from_a_grounded_replay_when_the_origin_was_not() -> None:
    turns = [view(0, "a", "oov"), view(1, "b", "teaching", replay=0), view(2, "c", "none", replay=0)]
    verdict = no_topic_drift_to_none(turns)
    assert (verdict.passed, verdict.evidence["checked"]) == (False, [2])


def test_drift_is_null_without_a_grounded_replay() -> None:
    assert no_topic_drift_to_none([view(0, "a", "none"), view(1, "b", "none", replay=0)]).passed is None
    assert no_topic_drift_to_none([view(0, "a", "pack")]).passed is None
