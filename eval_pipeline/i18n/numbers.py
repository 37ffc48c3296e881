"""``number_fidelity``: the numbers of the source survive, written the target locale's way.

A number is a run of digits, optionally grouped and with a decimal part. The source is read
with the source locale's separators, the translation with the target locale's (any grouping
that locale uses: thousands ``1 234 567`` or Indian ``12,34,567``, and the look-alike
spaces U+0020/U+00A0/U+202F for space-grouping locales). Values compare as decimals, so
``1,234.5`` (en-US) and ``1.234,5`` (de-DE) are the same number. Placeholders and required
tokens are masked first; in ICU messages only the top-level text is read (branch text is
selected at run time, so its numbers are not fixed facts of the message). A sign is not
part of a number.
"""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal, InvalidOperation
from functools import cache

from eval_pipeline.i18n.case import EvalCase
from eval_pipeline.i18n.icu import parse_icu
from eval_pipeline.i18n.locales import number_symbols
from eval_pipeline.i18n.params import NumberFidelity, PlaceholderIntegrity
from eval_pipeline.i18n.placeholder_integrity import effective_syntax
from eval_pipeline.i18n.placeholders import PlaceholderSyntaxError, flat_tokenizer
from eval_pipeline.i18n.registry import assertion_check
from eval_pipeline.i18n.results import Candidate, Finding, fail, ok


@cache
def _number_pattern(locale: str) -> re.Pattern[str]:
    groups, decimal = number_symbols(locale)
    group = "(?:" + "|".join(re.escape(g) for g in groups) + ")"
    grouped = rf"\d{{1,3}}(?:{group}\d{{3}})+|\d{{1,2}}(?:{group}\d{{2}})+{group}\d{{3}}"
    return re.compile(rf"(?<![\w])(?P<int>{grouped}|\d+)(?:{re.escape(decimal)}(?P<frac>\d+))?(?!\d)")


def numbers_in(text: str, locale: str) -> list[tuple[Decimal, str]]:
    """(value, as written) of every number in ``text`` read with ``locale``'s separators."""
    found: list[tuple[Decimal, str]] = []
    for match in _number_pattern(locale).finditer(text):
        digits = "".join(ch for ch in match.group("int") if ch.isdigit())
        frac = match.group("frac")
        try:
            value = Decimal(f"{int(digits)}.{frac}" if frac else str(int(digits)))
        except (InvalidOperation, ValueError):
            continue
        found.append((value, match.group(0)))
    return found


def maskable_text(case: EvalCase, text: str) -> str:
    """``text`` with placeholders and required tokens blanked out, ICU reduced to its top-level text."""
    spec = case.placeholder_spec or PlaceholderIntegrity(name="placeholder_integrity", severity="report")
    syntax = effective_syntax(case, spec)
    if syntax == "icu":
        try:
            nodes = parse_icu(text, strict=False)
        except PlaceholderSyntaxError:
            return text
        text = " ".join(n if isinstance(n, str) else " " for n in nodes)
    elif syntax != "none":
        try:
            tokens = flat_tokenizer(syntax, case.source, spec.params.pattern)(text)
        except PlaceholderSyntaxError:
            tokens = None
        for placeholder in tokens.items if tokens else ():
            text = text.replace(placeholder.text, " ")
    for token in case.required_tokens:
        text = text.replace(token, " ")
    return text


@assertion_check("number_fidelity")
def number_fidelity(case: EvalCase, spec: NumberFidelity, candidate: Candidate) -> list[Finding]:
    expected = numbers_in(maskable_text(case, case.source), case.source_locale)
    actual_text = maskable_text(case, candidate.text)
    actual = numbers_in(actual_text, case.target_locale)
    exp_count = Counter(v for v, _ in expected)
    act_count = Counter(v for v, _ in actual)
    misread = Counter(v for v, _ in numbers_in(actual_text, case.source_locale))
    findings: list[Finding] = []
    for value, written in expected:
        short = exp_count[value] - act_count[value]
        if short <= 0:
            continue
        exp_count[value] = act_count[value]  # report each value once
        if misread[value] >= short and number_symbols(case.source_locale) != number_symbols(
            case.target_locale
        ):
            findings.append(
                fail(
                    "number_wrong_separators",
                    f"The number {written} is written with {case.source_locale} separators, not {case.target_locale}'s.",
                    number=written,
                    value=str(value),
                )
            )
        else:
            findings.append(
                fail(
                    "number_missing",
                    f"The number {written} from the source is missing ({short} occurrence(s)).",
                    number=written,
                    value=str(value),
                    missing=short,
                )
            )
    if not spec.params.allow_extra_numbers and not any(f.code == "number_wrong_separators" for f in findings):
        source_count = Counter(v for v, _ in expected)
        for value, written in actual:
            if act_count[value] > source_count[value]:
                act_count[value] = source_count[value]
                findings.append(
                    fail(
                        "number_extra",
                        f"The number {written} is not in the source.",
                        number=written,
                        value=str(value),
                    )
                )
    if findings:
        return findings
    return [ok("Every number of the source is preserved.", numbers=[w for _, w in expected])]
