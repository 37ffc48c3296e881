"""The six fluency predicates, on the seed's own example surfaces and on both sides of each rule."""

from __future__ import annotations

import pytest

from eval_pipeline.predicates import TURN_ERROR, TurnView, get_turn_predicate

# Seed 001, verbatim shapes: the pre-gloss bare disclosure and its glossed form.
BARE = (
    "doubt — pack-grounded (en_core_meta_v1):\n"
    "meta.mental_state.uncertainty; meta.mental_state; cognition.epistemic.\n"
    "No session evidence yet."
)
GLOSSED = "Doubt is a mental state of uncertainty about a claim.\nPack-grounded (en_core_meta_v1)."


def verdict(
    name: str, surface: str, grounding: str | None = "pack", tag: str | None = "pack-grounded"
) -> bool | None:
    return get_turn_predicate(name)(TurnView(surface, grounding, tag)).passed


def test_bare_disclosure_fails_both_lift_predicates() -> None:
    assert verdict("no_provenance_only", BARE) is False
    assert verdict("no_dotted_inventory", BARE) is False


def test_glossed_form_passes_both_lift_predicates() -> None:
    assert verdict("no_provenance_only", GLOSSED) is True
    assert verdict("no_dotted_inventory", GLOSSED) is True


def test_bare_disclosure_still_passes_the_pinned_floors() -> None:
    # Seed 001's baseline: pre-gloss surfaces hold the hard floors; only the lift metrics drop.
    for name in ("no_placeholder", "complete_punctuation", "finite_predicate_shape"):
        assert verdict(name, BARE) is True, name


def test_second_disclosure_ending_is_recognised() -> None:
    surface = "truth — pack-grounded (en_core_meta_v1): meta.epistemic.truth. No prior turn in this session to correct yet."
    assert verdict("no_provenance_only", surface) is False


def test_disclosure_with_more_after_it_is_not_provenance_only() -> None:
    assert verdict("no_provenance_only", BARE + " Doubt is a state of uncertainty.") is True


@pytest.mark.parametrize("surface", ["river flows valley", "knowledge does not necessitates force", "It is"])
def test_unterminated_surfaces_fail_complete_punctuation(surface: str) -> None:
    assert verdict("complete_punctuation", surface) is False


@pytest.mark.parametrize("surface", ["It is.", "Is it?", "It is!", "a; b;", "Done.  \n"])
def test_terminal_punctuation_passes(surface: str) -> None:
    assert verdict("complete_punctuation", surface) is True


@pytest.mark.parametrize("marker", ["...", "…", "<pending>", "<prior>", "<empty>"])
def test_each_placeholder_fails(marker: str) -> None:
    result = get_turn_predicate("no_placeholder")(TurnView(f"Truth is {marker} here."))
    assert result.passed is False
    assert marker in result.evidence["found"]


def test_no_placeholder_passes_plain_text() -> None:
    assert verdict("no_placeholder", "Truth is what matches the world.") is True


@pytest.mark.parametrize(
    ("surface", "expected"),
    [
        ("Truth is agreement with fact.", True),  # closed-list auxiliary
        ("The river flooded the valley.", True),  # -ed form
        ("river flows valley", True),  # third-person -s after the first word
        ("meta.epistemic.truth; logic.semantics", False),
        ("Glass, moss and lotus.", False),  # -ss / -us endings are not verbs
        ("Apples", False),  # a lone -s word is a plural, not a predicate
    ],
)
def test_finite_predicate_shape(surface: str, expected: bool) -> None:
    assert verdict("finite_predicate_shape", surface) is expected


@pytest.mark.parametrize(
    ("surface", "expected"),
    [
        ("meta.x.y; meta.x; cognition.z", False),
        ("see meta.x.y;meta.x ;cognition.z.w for more", False),
        ("meta.x.y; meta.x", True),  # two paths are not an inventory
        ("Use e.g. this; or that; or those.", True),  # one dotted token is no inventory
        ("Plain words; joined; by semicolons.", True),
    ],
)
def test_dotted_inventory(surface: str, expected: bool) -> None:
    assert verdict("no_dotted_inventory", surface) is expected


@pytest.mark.parametrize(
    ("surface", "grounding", "tag", "expected"),
    [
        (GLOSSED, "pack", "pack-grounded", True),
        (GLOSSED, "teaching", "teaching-grounded", False),  # text claims pack, source is teaching
        ("A taught claim.", "teaching", "teaching-grounded", True),
        ("A taught claim.", "pack", "teaching-grounded", False),  # tag contradicts source
        ("I do not know that word.", "oov", "oov-invitation", True),
        ("I do not know that word.", "none", "oov-invitation", True),  # neither side claims grounding
        ("A pack answer.", "none", "pack-grounded", False),  # claims grounding it does not have
        ("A plain answer.", "pack", None, True),  # claims no provenance, so cannot contradict it
    ],
)
def test_surface_provenance_match(
    surface: str, grounding: str, tag: str | None, expected: bool | None
) -> None:
    assert verdict("surface_provenance_match", surface, grounding, tag) is expected


def test_faulted_turn_fails_every_predicate() -> None:
    turn = TurnView("", error="TimeoutError: no answer")
    for name in (
        "no_placeholder",
        "complete_punctuation",
        "finite_predicate_shape",
        "no_provenance_only",
        "no_dotted_inventory",
        "surface_provenance_match",
    ):
        result = get_turn_predicate(name)(turn)
        assert result.passed is False and result.code == TURN_ERROR, name


def test_provenance_match_is_binary_and_counts_every_case() -> None:
    """Untagged surfaces that claim nothing pass (code no_provenance_claim); the rate's denominator is every case."""
    from eval_pipeline.lanes import find_lane
    from eval_pipeline.run.pipeline import evaluate_lane
    from eval_pipeline.runtimes import build_runtime

    run = evaluate_lane(
        find_lane("deterministic_fluency"),
        "public",
        build_runtime("python:eval_pipeline_tests.runtimes.bots:make_untagged_bot"),
    )
    rows = run.case_predicates[run.case_predicates["predicate"] == "surface_provenance_match"]
    unclaimed = rows[rows["code"] == "no_provenance_claim"]
    assert len(unclaimed) > 0 and unclaimed["passed"].all()
    assert rows["passed"].notna().all()
    rate = next(m for m in run.metric_values if m.metric == "surface_provenance_match_rate")
    assert rate.denominator == len(run.cases)
