"""The embedded reference runtime: pack answers, glosses, OOV invitations, causes, teaching, isolation."""

from __future__ import annotations

import pytest

from eval_pipeline.runtimes import RuntimeSpecError, build_runtime
from eval_pipeline.runtimes.reference import ReferenceRuntime, default_pack


def ask(
    prompt: str, *, glosses: bool = True, setup: tuple[str, ...] = ()
) -> tuple[str, str | None, str | None]:
    session = ReferenceRuntime(glosses=glosses).open_session("case")
    for turn in setup:
        session.send(turn)
    response = session.send(prompt)
    return response.surface, response.grounding_source, response.surface_tag


def test_definition_uses_the_gloss_and_discloses_the_pack() -> None:
    surface, grounding, tag = ask("What is doubt?")
    assert surface == "Doubt is a mental state of uncertainty about a claim. Pack-grounded (en_core_meta_v1)."
    assert (grounding, tag) == ("pack", "pack-grounded")


def test_without_glosses_the_bare_disclosure_shape_returns() -> None:
    surface, grounding, _ = ask("What is doubt?", glosses=False)
    pack = default_pack()
    paths = "; ".join(pack.concepts["doubt"].paths)
    assert surface == f"doubt — pack-grounded ({pack.pack_id}): {paths}. No session evidence yet."
    assert grounding == "pack"


def test_a_concept_without_gloss_falls_back_to_the_disclosure_even_with_glosses_on() -> None:
    assert default_pack().concepts["courage"].gloss is None
    surface, _, _ = ask("What is courage?")
    assert surface.startswith("courage — pack-grounded")


@pytest.mark.parametrize("prompt", ["What is a glimmerwort?", 'What does "florbid" mean?', "Define zorblat."])
def test_out_of_pack_words_get_an_invitation_to_teach(prompt: str) -> None:
    surface, grounding, tag = ask(prompt)
    assert "teach me" in surface and (grounding, tag) == ("oov", "oov-invitation")


def test_question_shapes_and_plurals_reach_the_same_concept() -> None:
    answers = {
        ask(p)[0]
        for p in ("What is a belief?", "What are beliefs?", "Define belief.", "Tell me about belief.")
    }
    assert len(answers) == 1


def test_unknown_causes_are_answered_honestly() -> None:
    surface, grounding, _ = ask("Why do volcanoes erupt?")
    assert "no causal chain for volcanoes" in surface and grounding == "none"
    _, grounding_known, _ = ask("What causes fear?")
    assert grounding_known == "partial"  # the lemma is in the pack, its causes are not


def test_a_correction_is_taught_as_a_speculative_claim_in_that_session_only() -> None:
    runtime = ReferenceRuntime()
    taught = runtime.open_session("a")
    ack = taught.send("Correction: serendipity is a fortunate discovery made by accident.")
    assert "speculative" not in ack.surface.lower()  # the teach turn does not self-mark (seed 002)
    answer = taught.send("What is serendipity?")
    assert answer.surface.startswith("(speculative, not yet reviewed) Serendipity is a fortunate discovery")
    assert (answer.grounding_source, answer.epistemic_status) == ("teaching", "SPECULATIVE")
    fresh = runtime.open_session("b").send("What is serendipity?")
    assert fresh.grounding_source == "oov"  # no state leaks between sessions


def test_same_prompts_give_byte_identical_surfaces() -> None:
    prompts = ["What is truth?", "Actually, truth is what survives review.", "What is truth?", "hello"]
    runs = []
    for _ in range(2):
        session = ReferenceRuntime().open_session("x")
        runs.append([session.send(p).model_dump_json() for p in prompts])
    assert runs[0] == runs[1]


def test_specs_select_the_mode_and_reject_unknown_ones() -> None:
    assert build_runtime("reference").spec == "reference"
    assert build_runtime("reference:no-gloss").spec == "reference:no-gloss"
    with pytest.raises(RuntimeSpecError, match="unknown reference mode") as refused:
        build_runtime("reference:fancy")
    assert str(refused.value).endswith(  # every mode it takes, each a spec to copy
        "'reference', 'reference:gloss', 'reference:no-gloss', 'reference:no-refusal' "
        "or 'reference:warm-drift'"
    )
    for spec in ("reference:no-refusal", "reference:warm-drift"):
        assert build_runtime(spec).spec == spec
    assert build_runtime("reference:gloss").spec == "reference"  # glosses are the default
    with pytest.raises(RuntimeSpecError, match="unknown runtime"):
        build_runtime("nosuchscheme:x")
