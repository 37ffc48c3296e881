"""placeholder_integrity: every code on both sides, per syntax, including the seed's named cases."""

from __future__ import annotations

import pytest

from eval_pipeline.i18n.placeholders import detect_syntax
from eval_pipeline_tests.i18n.helpers import assertion, make_case, placeholder_codes, results


def test_seed_example_reports_the_missing_placeholder_with_evidence() -> None:
    case = make_case("Welcome, %s! You have %d coins.", assertion("placeholder_integrity", syntax="printf"))
    [result] = results(case, "欢迎，%s！")
    assert (result.passed, result.severity, result.code) == (False, "hard", "placeholder_missing")
    assert result.evidence == {"expected": "%d"}
    assert "%d" in result.message


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [
        ("%s %s", "%s %s", ["ok"]),
        ("%s %s", "%s", ["placeholder_count_mismatch"]),  # identity AND multiplicity
        ("%s and %d", "%s", ["placeholder_missing"]),
        ("%s", "%s %d", ["placeholder_extra"]),
        ("%.2f km", "%f km", ["placeholder_mutated"]),
        ("%-5d|%+.3e", "%-5d|%+.3e", ["ok"]),
        ("%1$s gave %2$d", "%2$d given by %1$s", ["ok"]),  # positional may move
        ("%s gave %d", "%d given by %s", ["placeholder_reorder_unsupported"]),
        ("50%% off", "50%% 折扣", ["ok"]),
        ("50%% off", "50% 折扣", ["placeholder_malformed"]),  # '% ' followed by a CJK char is no directive
        ("Done: %d%%", "完成：%d%", ["placeholder_malformed"]),
        ("%1$s", "%1$d", ["placeholder_mutated"]),
    ],
)
def test_printf(source: str, text: str, expected: list[str]) -> None:
    assert placeholder_codes(source, text, "printf") == expected


def test_positional_reorder_fails_with_its_own_code_when_forbidden() -> None:
    assert placeholder_codes("%1$s…%2$d", "%2$d…%1$s", "printf", allow_reorder=False) == [
        "placeholder_reordered"
    ]
    assert placeholder_codes("%1$s…%2$d", "%2$d…%1$s", "printf", allow_reorder=True) == ["ok"]


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [
        ("Hi %(name)s, %(n)d new", "%(n)d 条新消息，%(name)s", ["ok"]),
        ("Hi %(name)s", "你好 %(nom)s", ["placeholder_mutated"]),
        ("Hi %(name)s", "你好 %(name)d", ["placeholder_mutated"]),
        ("%(user)s and %(user)s", "%(user)s", ["placeholder_count_mismatch"]),
        ("%(p).1f%% done", "完成 %(p).1f%", ["placeholder_malformed"]),
        ("Hi {name}, {count:d} new", "{count:d} 条，{name}", ["ok"]),
        ("Hi {name}", "你好", ["placeholder_missing"]),
        ("{count:d} new", "{count} 条", ["placeholder_mutated"]),
        ("Use {{braces}} around {x}", "用 {{braces}} 包住 {x}", ["ok"]),
        ("Use {{braces}} around {x}", "用 {braces} 包住 {x}", ["placeholder_extra"]),
        ("Use {{braces}}", "用 {braces", ["placeholder_malformed"]),
        ("{} of {}", "{} / {}", ["ok"]),
        ("{0} beat {1}", "{1} lost to {0}", ["ok"]),
    ],
)
def test_python(source: str, text: str, expected: list[str]) -> None:
    assert placeholder_codes(source, text, "python") == expected


def test_python_reorder_forbidden() -> None:
    assert placeholder_codes("{a} {b}", "{b} {a}", "python", allow_reorder=False) == ["placeholder_reordered"]


PLURAL = "You have {count, plural, one {# message} other {# messages}} from {sender}."


@pytest.mark.parametrize(
    ("text", "target", "expected"),
    [
        # zh-Hans rightly keeps only `other`: compared per branch, not as one flat multiset.
        ("{sender} 发来 {count, plural, other {# 条消息}}。", "zh-Hans", ["ok"]),
        ("{count, plural, other {条消息}} {sender}", "zh-Hans", ["placeholder_missing"]),  # dropped #
        ("{count, plural, other {# # 条}} {sender}", "zh-Hans", ["placeholder_count_mismatch"]),
        ("{count, pluriel, other {# 条}} {sender}", "zh-Hans", ["icu_keyword_mutated"]),  # translated keyword
        ("{count, plural, one {# x} other {# 条}} {sender}", "zh-Hans", ["icu_plural_category_invalid"]),
        (
            "{count, plural, un {# x} autre {# y}} {sender}",
            "fr-FR",
            ["icu_branch_missing", "icu_plural_category_invalid"],
        ),
        (
            "{count, plural, one {# a} few {# b} other {# c}} {sender}",
            "ru",
            ["icu_branch_missing"],
        ),  # no `many`
        ("{count, plural, one {# a} few {# b} many {# c} other {# d}} {sender}", "ru", ["ok"]),
        ("{count, plural, =5 {five} other {# 条}} {sender}", "zh-Hans", ["icu_branch_extra"]),
        ("{count, plural, other {# 条}} {who}", "zh-Hans", ["placeholder_mutated"]),
        ("{count, plural, other {# 条 {sender}}}", "zh-Hans", ["placeholder_extra", "placeholder_missing"]),
        ("{count, plural, other {# 条}", "zh-Hans", ["placeholder_malformed"]),
    ],
)
def test_icu_plural(text: str, target: str, expected: list[str]) -> None:
    assert placeholder_codes(PLURAL, text, "icu", target) == expected


def test_icu_select_branches_and_order() -> None:
    source = "{g, select, female {She} other {They}} met {name}."
    assert placeholder_codes(source, "{name} 见了 {g, select, female {她} other {他们}}", "icu") == ["ok"]
    assert placeholder_codes(source, "{g, select, other {他们}} {name}", "icu") == ["icu_branch_missing"]
    assert placeholder_codes(source, "{g, select, female {她} male {他} other {他们}} {name}", "icu") == [
        "icu_branch_extra"
    ]
    reordered = "{name} 见了 {g, select, female {她} other {他们}}"
    assert placeholder_codes(source, reordered, "icu", allow_reorder=False) == ["placeholder_reordered"]


def test_icu_exact_branch_must_be_kept() -> None:
    source = "{n, plural, =0 {none} other {# items}}"
    assert placeholder_codes(source, "{n, plural, other {# 个}}", "icu") == ["icu_branch_missing"]
    assert placeholder_codes(source, "{n, plural, =0 {没有} other {# 个}}", "icu") == ["ok"]


def test_custom_pattern() -> None:
    params = {"pattern": r"\$\{[a-z_]+\}"}
    assert placeholder_codes("Hi ${name}", "你好 ${name}", "custom", **params) == ["ok"]
    assert placeholder_codes("Hi ${name}", "你好 ${nom}", "custom", **params) == ["placeholder_mutated"]
    assert placeholder_codes("${a} ${a}", "${a}", "custom", **params) == ["placeholder_count_mismatch"]
    assert placeholder_codes("${a} ${b}", "${b} ${a}", "custom", allow_reorder=False, **params) == [
        "placeholder_reordered"
    ]


@pytest.mark.parametrize(
    ("source", "syntax"),
    [
        ("{n, plural, other {# x}}", "icu"),
        ("%(name)s", "python"),
        ("%s", "printf"),
        ("{name}", "python"),
        ("50% off {", "none"),  # "% o" parses as printf, but detection does not take it for one
        ("Plain text", "none"),
    ],
)
def test_auto_detection(source: str, syntax: str) -> None:
    assert detect_syntax(source) == syntax


def test_auto_without_placeholders_rejects_invented_ones() -> None:
    assert placeholder_codes("Settings", "设置") == ["ok"]
    assert placeholder_codes("Settings", "设置 %s") == ["placeholder_extra"]
    assert placeholder_codes("Settings", "设置 100%") == ["ok"]  # a literal percent in plain text is text
