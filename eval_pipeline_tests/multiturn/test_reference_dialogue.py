"""The reference runtime's teaching, status, topic-tracking and anaphora behaviour."""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.predicates.status import status_markers
from eval_pipeline.predicates.thread import mentions_lemma, reference_disclosure
from eval_pipeline.runtimes.base import TurnResponse
from eval_pipeline.runtimes.reference import ReferenceRuntime

TEACH = "Correction: wisdom is the love of owls."


def converse(prompts: Sequence[str], runtime: ReferenceRuntime | None = None) -> list[TurnResponse]:
    session = (runtime or ReferenceRuntime()).open_session("case")
    return [session.send(prompt) for prompt in prompts]


def test_teaching_is_acknowledged_unmarked_then_surfaced_as_speculative() -> None:
    taught, probe = converse([TEACH, "What is wisdom?"])
    assert status_markers(taught.surface) == []
    assert taught.grounding_source == "teaching"
    assert "love of owls" in probe.surface and status_markers(probe.surface)
    assert probe.epistemic_status == "SPECULATIVE"


def test_status_question_reports_the_most_recent_claim() -> None:
    *_, after_teaching = converse([TEACH, "What is wisdom?", "Is your answer confirmed?"])
    *_, after_pack = converse([TEACH, "What is truth?", "Has this been reviewed?"])
    assert status_markers(after_teaching.surface) and after_teaching.epistemic_status == "SPECULATIVE"
    assert "wisdom" in after_teaching.surface
    assert status_markers(after_pack.surface) == [] and "truth" in after_pack.surface
    assert after_pack.grounding_source == "pack"


def test_named_status_question_reports_that_claim_whatever_came_since() -> None:
    *_, named = converse([TEACH, "What is truth?", "Is wisdom confirmed?"])
    *_, wrapped = converse([TEACH, "What is truth?", "Has your answer about wisdom been reviewed?"])
    for response in (named, wrapped):
        assert status_markers(response.surface) and "wisdom" in response.surface


def test_status_question_with_nothing_said_reports_no_claim() -> None:
    (response,) = converse(["Is your answer confirmed?"])
    assert status_markers(response.surface) == [] and response.grounding_source == "none"


def test_anaphora_resolves_to_the_most_recent_subject() -> None:
    responses = converse(["What is wisdom?", "What is memory?", "What about that?", "Why does it matter?"])
    follow_up, why = responses[2], responses[3]
    assert mentions_lemma(follow_up.surface, "memory") and not mentions_lemma(follow_up.surface, "wisdom")
    assert follow_up.grounding_source == "pack"
    assert mentions_lemma(why.surface, "memory") and why.grounding_source == "partial"


def test_anaphora_to_a_taught_subject_keeps_the_speculative_mark() -> None:
    *_, more = converse([TEACH, "Tell me more about it."])
    assert mentions_lemma(more.surface, "wisdom") and status_markers(more.surface)


def test_unresolvable_anaphora_is_disclosed_plainly() -> None:
    (response,) = converse(["What about that?"])
    assert reference_disclosure(response.surface) == "cannot_tell_referent"
    assert response.grounding_source == "none"


def test_sessions_share_no_state() -> None:
    runtime = ReferenceRuntime()
    teacher = runtime.open_session("a")
    stranger = runtime.open_session("b")
    teacher.send(TEACH)
    teacher.send("What is memory?")
    assert "owls" not in stranger.send("What is wisdom?").surface
    assert reference_disclosure(runtime.open_session("c").send("What about that?").surface) is not None
    assert status_markers(runtime.open_session("d").send("Is wisdom confirmed?").surface) == []


def test_the_same_thread_gives_byte_identical_surfaces() -> None:
    thread = [
        "What is a glimmerwort?",
        "Actually, a glimmerwort is a glowing moss.",
        "What about that?",
        "Is your answer confirmed?",
        "What is trust?",
        "Why does it matter?",
        "What is a glimmerwort?",
    ]
    first = [r.model_dump() for r in converse(thread)]
    second = [r.model_dump() for r in converse(thread, ReferenceRuntime())]
    assert first == second
