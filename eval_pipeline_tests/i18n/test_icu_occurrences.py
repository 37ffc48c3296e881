"""ICU placeholder_integrity compares argument occurrences, not names: an argument used more than
once (as plural and number, or as two plurals) is paired occurrence by occurrence, and a failure
names the occurrence it concerns."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from eval_pipeline.i18n import AssertionResult, EvalCase
from eval_pipeline.i18n.params import PlaceholderIntegrity
from eval_pipeline.i18n.placeholder_integrity import effective_syntax
from eval_pipeline.lanes import find_lane
from eval_pipeline.run.pipeline import load_split
from eval_pipeline_tests.i18n.helpers import assertion, make_case, placeholder_codes, results


def icu_results(source: str, text: str, target: str = "de", **params: Any) -> list[AssertionResult]:
    case = make_case(source, assertion("placeholder_integrity", syntax="icu", **params), target_locale=target)
    return results(case, text)


def failures(source: str, text: str, target: str = "de", **params: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(r.code, r.evidence) for r in icu_results(source, text, target, **params) if not r.passed]


# Issue example 1: the same argument as a plural and as a number.
PLURAL_THEN_NUMBER = "You have {count, plural, one {# message} other {# messages}}. Yes. {count, number}."


def test_a_plural_and_a_number_of_one_argument_are_two_occurrences() -> None:
    assert placeholder_codes(PLURAL_THEN_NUMBER, PLURAL_THEN_NUMBER, "icu", "de") == ["ok"]
    german = "Du hast {count, plural, one {# Nachricht} other {# Nachrichten}}. Ja. {count, number}."
    assert placeholder_codes(PLURAL_THEN_NUMBER, german, "icu", "de") == ["ok"]
    # Dropping the number is a missing occurrence, not a keyword change of the plural.
    assert failures(
        PLURAL_THEN_NUMBER, "Du hast {count, plural, one {# Nachricht} other {# Nachrichten}}."
    ) == [("placeholder_missing", {"expected": "{count, number}"})]


# Issue example 2: two plurals of one argument.
FILES_IN_FOLDERS = (
    "{n, plural, one {# file} other {# files}} in {n, plural, one {# folder} other {# folders}}"
)


def test_a_hash_lost_in_the_first_of_two_plurals_fails_on_that_branch_only() -> None:
    text = "{n, plural, one {eine Datei} other {# Dateien}} in {n, plural, one {# Ordner} other {# Ordner}}"
    [result] = icu_results(FILES_IN_FOLDERS, text)
    assert (result.passed, result.code) == (False, "placeholder_missing")
    assert result.evidence == {"expected": "#", "where": "1st {n, plural}[one]"}
    assert "1st {n, plural}[one]" in result.message


def test_the_same_loss_in_the_second_plural_is_reported_once_for_the_second() -> None:
    text = "{n, plural, one {# Datei} other {# Dateien}} in {n, plural, one {ein Ordner} other {# Ordner}}"
    assert failures(FILES_IN_FOLDERS, text) == [
        ("placeholder_missing", {"expected": "#", "where": "2nd {n, plural}[one]"})
    ]


def test_repeated_plurals_count_as_a_multiset() -> None:
    one_plural = "{n, plural, one {# Datei} other {# Dateien}}"
    [(code, evidence)] = failures(FILES_IN_FOLDERS, one_plural)
    assert (code, evidence["expected_count"], evidence["actual_count"]) == (
        "placeholder_count_mismatch",
        2,
        1,
    )


def test_a_keyword_changed_in_one_of_two_plurals_names_that_occurrence() -> None:
    text = "{n, plural, one {# Datei} other {# Dateien}} in {n, pluriel, one {# Ordner} other {# Ordner}}"
    [(code, evidence)] = failures(FILES_IN_FOLDERS, text)
    assert code == "icu_keyword_mutated"
    assert evidence == {
        "argument": "n",
        "occurrence": "2nd {n, plural}",
        "expected": "plural",
        "actual": "pluriel",
    }
    first = "{n, pluriel, one {# Datei} other {# Dateien}} in {n, plural, one {# Ordner} other {# Ordner}}"
    assert [e["occurrence"] for _, e in failures(FILES_IN_FOLDERS, first)] == ["1st {n, plural}"]


def test_a_branch_missing_in_one_of_two_plurals_names_that_occurrence() -> None:
    text = "{n, plural, one {# Datei} other {# Dateien}} in {n, plural, other {# Ordner}}"
    assert failures(FILES_IN_FOLDERS, text) == [
        (
            "icu_branch_missing",
            {"branch": "one", "argument": "2nd {n, plural}", "occurrence": "2nd {n, plural}"},
        )
    ]


# The same argument under plural, select, number and as a simple argument in one message.
MIXED = "{n, plural, one {# item} other {# items}} for {n, select, vip {members} other {guests}}: {n, number} ({n})"
MIXED_DE = "{n, plural, one {# Artikel} other {# Artikel}} für {n, select, vip {Mitglieder} other {Gäste}}: {n, number} ({n})"


def test_mixed_uses_of_one_argument_pass_when_kept_and_may_move() -> None:
    assert placeholder_codes(MIXED, MIXED, "icu", "de") == ["ok"]
    assert placeholder_codes(MIXED, MIXED_DE, "icu", "de") == ["ok"]
    moved = "({n}) {n, number}: {n, select, vip {Mitglieder} other {Gäste}}, {n, plural, one {# Artikel} other {# Artikel}}"
    assert placeholder_codes(MIXED, moved, "icu", "de") == ["ok"]
    [(code, evidence)] = failures(MIXED, moved, allow_reorder=False)
    assert code == "placeholder_reordered"
    assert evidence["expected_order"] == ["{n, plural, …}", "{n, select, …}", "{n, number}", "{n}"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("({n})", ""), [("placeholder_missing", {"expected": "{n}"})]),
        (
            ("{n, number}", "{n, number, integer}"),
            [
                (
                    "placeholder_mutated",
                    {
                        "expected": "{n, number}",
                        "actual": "{n, number, integer}",
                        "occurrence": "{n, number}",
                    },
                )
            ],
        ),
        (
            ("{n, select,", "{n, auswahl,"),
            [
                (
                    "icu_keyword_mutated",
                    {"argument": "n", "occurrence": "{n, select}", "expected": "select", "actual": "auswahl"},
                )
            ],
        ),
        (
            ("vip {Mitglieder} ", ""),
            [
                (
                    "icu_branch_missing",
                    {"branch": "vip", "argument": "{n, select}", "occurrence": "{n, select}"},
                )
            ],
        ),
        (  # the type dropped: a changed keyword of that occurrence, not one {n} too many
            ("{n, number}", "{n}"),
            [
                (
                    "icu_keyword_mutated",
                    {"argument": "n", "occurrence": "{n, number}", "expected": "number", "actual": None},
                )
            ],
        ),
    ],
)
def test_mixed_uses_report_the_occurrence_that_changed(
    change: tuple[str, str], expected: list[tuple[str, dict[str, Any]]]
) -> None:
    old, new = change
    assert old in MIXED_DE
    assert failures(MIXED, MIXED_DE.replace(old, new, 1)) == expected


# Plurals of one name nested in select branches, twice in one branch.
NESTED = (
    "{g, select,"
    " female {{n, plural, one {# photo} other {# photos}} and {n, plural, one {# video} other {# videos}} of hers}"
    " other {{n, plural, one {# photo} other {# photos}} of theirs}}"
)
NESTED_DE = (
    "{g, select,"
    " female {{n, plural, one {# Foto} other {# Fotos}} und {n, plural, one {# Video} other {# Videos}} von ihr}"
    " other {{n, plural, one {# Foto} other {# Fotos}} von ihnen}}"
)


def test_nested_plurals_with_a_repeated_name_pass_when_kept() -> None:
    assert placeholder_codes(NESTED, NESTED, "icu", "de") == ["ok"]
    assert placeholder_codes(NESTED, NESTED_DE, "icu", "de") == ["ok"]


def test_nested_plurals_report_the_branch_path_down_to_the_occurrence() -> None:
    lost_hash = NESTED_DE.replace("other {# Videos}", "other {Videos}")
    assert failures(NESTED, lost_hash) == [
        ("placeholder_missing", {"expected": "#", "where": "{g, select}[female] / 2nd {n, plural}[other]"})
    ]
    lost_branch = NESTED_DE.replace(
        "{n, plural, one {# Foto} other {# Fotos}} und", "{n, plural, other {# Fotos}} und"
    )
    assert failures(NESTED, lost_branch) == [
        (
            "icu_branch_missing",
            {
                "branch": "one",
                "argument": "{g, select}[female] / 1st {n, plural}",
                "occurrence": "1st {n, plural}",
            },
        )
    ]
    # The single plural of the `other` branch is no repeated occurrence: no ordinal.
    lost_other = NESTED_DE.replace("other {# Fotos}} von ihnen", "other {Fotos}} von ihnen")
    assert failures(NESTED, lost_other) == [
        ("placeholder_missing", {"expected": "#", "where": "{g, select}[other] / {n, plural}[other]"})
    ]


def test_flat_syntaxes_pair_equal_texts_before_reporting_a_change() -> None:
    # The same field twice with different conversions, swapped: a reorder, not two mutations.
    assert placeholder_codes("{a!r} and {a}", "{a} und {a!r}", "python") == ["ok"]
    assert placeholder_codes("{a!r} and {a}", "{a} und {a!r}", "python", allow_reorder=False) == [
        "placeholder_reordered"
    ]
    assert placeholder_codes("{a!r} and {a}", "{a!s} und {a}", "python") == ["placeholder_mutated"]


# --- Self-identity: any source is judged identical to itself. ---------------------------------


def _self_check(case: EvalCase) -> list[AssertionResult]:
    """The case's own placeholder_integrity on its source, for the source's locale (whose plural
    categories the source is written with)."""
    same_locale = case.model_copy(update={"target_locale": case.source_locale})
    return [r for r in results(same_locale, case.source) if r.assertion == "placeholder_integrity"]


def _repo_icu_cases() -> list[EvalCase]:
    spec = find_lane("i18n_prompt")
    cases = [loaded.case for split in spec.splits for loaded in load_split(spec, split)]
    return [
        case
        for case in cases
        for check in case.assertions
        if isinstance(check, PlaceholderIntegrity) and effective_syntax(case, check) == "icu"
    ]


REPO_ICU_CASES = _repo_icu_cases()


def test_the_repo_has_icu_cases_to_check() -> None:
    assert len(REPO_ICU_CASES) >= 5


@pytest.mark.parametrize("case", REPO_ICU_CASES, ids=lambda case: case.id)
def test_every_icu_case_in_the_repo_is_identical_to_itself(case: EvalCase) -> None:
    assert [(r.passed, r.code) for r in _self_check(case)] == [(True, "ok")]


@pytest.mark.parametrize("source", [PLURAL_THEN_NUMBER, FILES_IN_FOLDERS, MIXED, NESTED])
def test_this_files_sources_are_identical_to_themselves(source: str) -> None:
    case = make_case(source, assertion("placeholder_integrity", syntax="icu"), target_locale="en-US")
    assert [(r.passed, r.code) for r in _self_check(case)] == [(True, "ok")]


# Generated ICU sources in en-US's categories (plural: one/other; selectordinal: one/two/few/other).
_NAMES = st.sampled_from(["n", "count", "g", "who"])
_LITERAL = st.text(alphabet="abc XYZ.,:!éß", min_size=1, max_size=6)
_STYLES = st.sampled_from(["", ", number", ", number, integer", ", date, short", ", time"])
_EXACT = st.lists(st.sampled_from(["=0", "=1", "=2"]), unique=True, max_size=2)
_SELECT_KEYS = st.lists(st.sampled_from(["female", "male", "vip"]), unique=True, max_size=2)


@st.composite
def icu_messages(draw: st.DrawFn, depth: int = 2, in_plural: bool = False) -> str:
    """Literal text, simple and formatted arguments, ``#`` inside plurals, and plural,
    selectordinal and select arguments nesting messages down to ``depth``; names repeat often."""
    kinds = ["literal", "simple", *(["#"] if in_plural else []), *(["branching"] if depth > 0 else [])]
    parts: list[str] = []
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=5)):
        if kind == "literal":
            parts.append(draw(_LITERAL))
        elif kind == "simple":
            parts.append("{" + draw(_NAMES) + draw(_STYLES) + "}")
        elif kind == "#":
            parts.append("#")
        else:
            head, keys, plural = draw(
                st.sampled_from(
                    [
                        ("plural,", [*draw(_EXACT), "one", "other"], True),
                        ("plural, offset:1", ["one", "other"], True),
                        ("selectordinal,", ["one", "two", "few", "other"], True),
                        # ICU's `#` is special only directly in a plural branch: in a nested select it is text.
                        ("select,", [*draw(_SELECT_KEYS), "other"], False),
                    ]
                )
            )
            branches = " ".join(f"{key} {{{draw(icu_messages(depth - 1, plural))}}}" for key in keys)
            parts.append(f"{{{draw(_NAMES)}, {head} {branches}}}")
    # Parts are joined with a space so two literals never read as one.
    return " ".join(parts)


@settings(max_examples=200, deadline=None, database=None)
@given(source=icu_messages(), allow_reorder=st.booleans())
def test_any_generated_icu_source_is_identical_to_itself(source: str, allow_reorder: bool) -> None:
    case = make_case(
        source or "x",
        assertion("placeholder_integrity", syntax="icu", allow_reorder=allow_reorder),
        source_locale="en-US",
        target_locale="en-US",
    )
    assert [(r.passed, r.code) for r in _self_check(case)] == [(True, "ok")]


_PLACEHOLDER = re.compile(r"\{\w+(?:, (?:number|date|time)[^{}]*)?\}|#")


@settings(max_examples=100, deadline=None, database=None)
@given(source=icu_messages(), data=st.data())
def test_any_placeholder_deleted_from_a_generated_source_fails(source: str, data: st.DataObject) -> None:
    """The self-identity property is not vacuous: every occurrence, at any depth, is checked."""
    spans = [match.span() for match in _PLACEHOLDER.finditer(source)]
    assume(spans)
    start, end = data.draw(st.sampled_from(spans))
    case = make_case(
        source, assertion("placeholder_integrity", syntax="icu"), source_locale="en-US", target_locale="en-US"
    )
    codes = {r.code for r in results(case, source[:start] + source[end:]) if not r.passed}
    # The pattern also matches a plural branch whose body is one word (`other {X}`): deleting
    # that leaves `other }`, which must fail as malformed.
    assert codes & {
        "placeholder_missing",
        "placeholder_count_mismatch",
        "icu_keyword_mutated",
        "placeholder_malformed",
    }
