"""number_fidelity, required_tokens, forbidden_renderings, max_chars (and grapheme counting)."""

from __future__ import annotations

import pytest

from eval_pipeline.i18n import ASSERTION_NAMES, registered_assertions
from eval_pipeline.i18n.graphemes import grapheme_count
from eval_pipeline_tests.i18n.helpers import assertion, codes, make_case, results


def test_registry_covers_the_whole_v1_vocabulary() -> None:
    assert registered_assertions() == sorted(ASSERTION_NAMES)


@pytest.mark.parametrize(
    ("source", "text", "target", "expected"),
    [
        ("You earned 1,234,567.5 points.", "Du hast 1.234.567,5 Punkte.", "de-DE", ["ok"]),
        (
            "You earned 1,234,567 points.",
            "Du hast 1234567 Punkte.",
            "de-DE",
            ["ok"],
        ),  # ungrouped is the same number
        ("Only 12,500 left", "Plus que 12\u202f500", "fr-FR", ["ok"]),
        ("Only 12,500 left", "Plus que 12\u00a0500", "fr-FR", ["ok"]),  # look-alike space grouping
        ("Total 1,234,567", "कुल 12,34,567", "hi", ["ok"]),  # Indian grouping
        ("Speed 3.5x", "Tempo 3.5x", "de-DE", ["number_wrong_separators"]),
        ("Speed 3.5x", "Tempo 4,5x", "de-DE", ["number_extra", "number_missing"]),
        ("Level 10", "Stufe", "de-DE", ["number_missing"]),
        ("Level 10", "Stufe 10 von 20", "de-DE", ["number_extra"]),
        (
            "Rank %1$d of 10",
            "Rang %1$d von 10",
            "de-DE",
            ["ok"],
        ),  # digits inside placeholders are not numbers
    ],
)
def test_number_fidelity(source: str, text: str, target: str, expected: list[str]) -> None:
    case = make_case(source, assertion("number_fidelity"), target_locale=target)
    assert codes(case, text) == expected


def test_number_fidelity_allows_extra_numbers_when_asked() -> None:
    case = make_case(
        "Level 10", assertion("number_fidelity", allow_extra_numbers=True), target_locale="de-DE"
    )
    assert codes(case, "Stufe 10 von 20") == ["ok"]


def test_required_tokens() -> None:
    case = make_case("Gain XP: double XP!", assertion("required_tokens"), required_tokens=["XP"])
    assert codes(case, "获得 XP：双倍 XP！") == ["ok"]
    assert codes(case, "获得 XP：双倍经验！") == ["required_token_count_mismatch"]
    assert codes(case, "获得经验") == ["required_token_missing"]
    override = make_case("Open the HUD", assertion("required_tokens", tokens=["HUD"], case_sensitive=False))
    assert codes(override, "打开 hud") == ["ok"]
    [missing] = results(override, "打开界面")
    assert missing.evidence == {"token": "HUD"}


def test_forbidden_renderings() -> None:
    case = make_case("Open Steam", assertion("forbidden_renderings", renderings=["蒸汽", "steam app"]))
    assert codes(case, "打开 Steam") == ["ok"]
    assert codes(case, "打开蒸汽") == ["forbidden_rendering_present"]
    assert codes(case, "打开 STEAM APP") == ["forbidden_rendering_present"]  # case-insensitive by default
    sensitive = make_case("x", assertion("forbidden_renderings", renderings=["%1$ s"], case_sensitive=True))
    assert codes(sensitive, "%1$ S") == ["ok"]
    assert codes(sensitive, "%1$ s") == ["forbidden_rendering_present"]


def test_max_chars_counts_user_perceived_characters() -> None:
    case = make_case("OK", assertion("max_chars", limit=3))
    assert codes(case, "e\u0301\u0301👍🏽🇫🇷") == ["ok"]  # 3 clusters, 7 code points
    assert codes(case, "abcd") == ["max_chars_exceeded"]
    budget = make_case("Title", assertion("max_chars"), context={"max_chars": 4})
    [over] = results(budget, "Titel!")
    assert (over.code, over.evidence) == ("max_chars_exceeded", {"limit": 4, "count": 6})


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("abc", 3),
        ("e\u0301", 1),  # combining mark
        ("👨\u200d👩\u200d👧", 1),  # ZWJ sequence
        ("👍🏽", 1),  # emoji modifier
        ("🇫🇷🇩🇪", 2),  # regional indicator pairs
        ("\r\n", 1),
        ("한국어", 3),  # precomposed syllables
        ("\u1100\u1161\u11a8", 1),  # conjoining jamo L V T
        ("设置", 2),
    ],
)
def test_grapheme_count(text: str, count: int) -> None:
    assert grapheme_count(text) == count


def test_report_severity_travels_into_results() -> None:
    case = make_case("Continue", assertion("max_chars", "report", limit=3))
    [result] = results(case, "Fortsetzen")
    assert (result.passed, result.severity) == (False, "report")
