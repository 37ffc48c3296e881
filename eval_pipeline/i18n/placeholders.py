"""Placeholder tokens per syntax (printf, python, custom), auto detection, and the comparison
of expected against actual tokens by identity, multiplicity and order.

ICU MessageFormat is structured rather than flat; it lives in :mod:`eval_pipeline.i18n.icu`.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eval_pipeline.i18n.results import Finding, fail, ok

_PRINTF_DIRECTIVE = re.compile(
    r"%(?:(?P<index>[1-9]\d*)\$)?[-+ 0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspn@]"
)
# Detection is stricter than parsing: "50% off" must not read as the space-flagged directive "% o".
_LIKELY_PRINTF = re.compile(
    r"%(?:[1-9]\d*\$)?[-+0#']*\d*(?:\.\d+)?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcsp@]"
)
_PERCENT_NAMED = re.compile(r"%\((?P<name>[^()]+)\)[-+ 0#]*(?:\d+)?(?:\.\d+)?[diouxXeEfFgGcrsa]")
_COMPLEX_ICU = re.compile(r"\{\s*[\w.-]+\s*,\s*(?:plural|select|selectordinal|number|date|time)\b")


class PlaceholderSyntaxError(ValueError):
    """A text is not well formed in the placeholder syntax it is checked against."""


@dataclass(frozen=True)
class Placeholder:
    """One placeholder occurrence. ``key`` is its identity; ``text`` is how it is written."""

    key: str
    text: str


@dataclass(frozen=True)
class Tokens:
    """The placeholders of one text, in order, and whether this syntax can express reordering."""

    items: tuple[Placeholder, ...]
    reorderable: bool


def printf_tokens(text: str) -> Tokens:
    """printf directives: flags, width, precision, length, positional ``%1$s``; ``%%`` is a literal."""
    items: list[Placeholder] = []
    for position in _percent_positions(text):
        match = _PRINTF_DIRECTIVE.match(text, position)
        if match is None:
            raise PlaceholderSyntaxError(
                f"'%' at offset {position} starts no printf directive (write '%%' for a literal percent sign)"
            )
        index = match.group("index")
        items.append(Placeholder(f"%{index}$" if index else match.group(0), match.group(0)))
    positional = [p.key.endswith("$") for p in items]
    if any(positional) and not all(positional):
        raise PlaceholderSyntaxError("mixes positional (%1$s) and unnumbered (%s) printf directives")
    return Tokens(tuple(items), reorderable=all(positional))


def percent_named_tokens(text: str) -> Tokens:
    """Python ``%(name)s`` directives; ``%%`` is a literal; any other ``%`` is malformed."""
    items: list[Placeholder] = []
    for position in _percent_positions(text):
        match = _PERCENT_NAMED.match(text, position)
        if match is None:
            raise PlaceholderSyntaxError(
                f"'%' at offset {position} starts no %(name)s directive (write '%%' for a literal percent sign)"
            )
        items.append(Placeholder(match.group("name"), match.group(0)))
    return Tokens(tuple(items), reorderable=True)


def brace_tokens(text: str) -> Tokens:
    """``str.format`` fields as :class:`string.Formatter` parses them; ``{{`` and ``}}`` are literals."""
    items: list[Placeholder] = []
    automatic = False
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise PlaceholderSyntaxError(f"not a valid format string: {exc}") from None
    for _literal, field_name, format_spec, conversion in parsed:
        if field_name is None:
            continue
        written = "{" + field_name + (f"!{conversion}" if conversion else "")
        written += (f":{format_spec}" if format_spec else "") + "}"
        automatic = automatic or field_name == ""
        items.append(Placeholder(field_name or written, written))
    return Tokens(tuple(items), reorderable=not automatic)


def python_tokens(text: str, *, percent_style: bool) -> Tokens:
    return percent_named_tokens(text) if percent_style else brace_tokens(text)


def uses_percent_named(source: str) -> bool:
    """Python syntax is %-style when the source has a ``%(name)`` directive, else ``str.format`` style."""
    return _PERCENT_NAMED.search(source) is not None


def custom_tokens(text: str, pattern: str) -> Tokens:
    """Every non-overlapping match of the case's pattern is one placeholder, identified by its text."""
    return Tokens(tuple(Placeholder(m.group(0), m.group(0)) for m in re.finditer(pattern, text)), True)


def detect_syntax(source: str) -> str:
    """Auto detection, first match wins: ``icu`` (an argument with a type: ``{n, plural, …}``),
    ``printf`` (a printf directive), ``python`` (``%(name)s`` or a ``{field}``), else ``none``."""
    if _COMPLEX_ICU.search(source):
        return "icu"
    if uses_percent_named(source):
        return "python"
    if _LIKELY_PRINTF.search(source.replace("%%", "")):
        return "printf"
    try:
        if brace_tokens(source).items:
            return "python"
    except PlaceholderSyntaxError:
        return "none"
    return "none"


def flat_tokenizer(syntax: str, source: str, pattern: str | None = None) -> Callable[[str], Tokens]:
    """The tokenizer a flat (non-ICU) syntax uses for both the source and its candidate."""
    if syntax == "printf":
        return printf_tokens
    if syntax == "python":
        percent_style = uses_percent_named(source)
        return lambda text: python_tokens(text, percent_style=percent_style)
    if syntax == "custom" and pattern is not None:
        return lambda text: custom_tokens(text, pattern)
    raise ValueError(f"no flat tokenizer for syntax {syntax!r}")


def compare_tokens(
    expected: Tokens, actual: Tokens, *, allow_reorder: bool, where: str = ""
) -> list[Finding]:
    """Identity and multiplicity first, then order. An empty list means nothing is wrong."""
    exp_keys = [p.key for p in expected.items]
    act_keys = [p.key for p in actual.items]
    exp_count, act_count = Counter(exp_keys), Counter(act_keys)
    missing = [k for k in exp_count if k not in act_count]
    extra = [k for k in act_count if k not in exp_count]
    findings: list[Finding] = []
    context = {"where": where} if where else {}
    # The same slot written differently (a rename, a changed conversion) is a mutation, not loss + gain.
    if len(exp_keys) == len(act_keys):
        for exp_item, act_item in zip(expected.items, actual.items, strict=True):
            if exp_item.key in missing and act_item.key in extra:
                missing.remove(exp_item.key)
                extra.remove(act_item.key)
                findings.append(_mutated(exp_item.text, act_item.text, context))
    for key in missing:
        text = _text_of(expected.items, key)
        findings.append(
            fail("placeholder_missing", f"Expected placeholder {text} is missing.", expected=text, **context)
        )
    for key in extra:
        text = _text_of(actual.items, key)
        findings.append(
            fail("placeholder_extra", f"Placeholder {text} is not in the source.", actual=text, **context)
        )
    for key in exp_count.keys() & act_count.keys():
        if exp_count[key] != act_count[key]:
            text = _text_of(expected.items, key)
            findings.append(
                fail(
                    "placeholder_count_mismatch",
                    f"Placeholder {text} occurs {act_count[key]} time(s); the source has {exp_count[key]}.",
                    placeholder=text,
                    expected_count=exp_count[key],
                    actual_count=act_count[key],
                    **context,
                )
            )
        else:
            exp_texts = [p.text for p in expected.items if p.key == key]
            act_texts = [p.text for p in actual.items if p.key == key]
            for exp_text, act_text in zip(exp_texts, act_texts, strict=True):
                if exp_text != act_text:
                    findings.append(_mutated(exp_text, act_text, context))
    if findings or exp_keys == act_keys:
        return sorted(findings, key=lambda f: (f.code, str(sorted(f.evidence.items()))))
    order = {
        "expected_order": [p.text for p in expected.items],
        "actual_order": [p.text for p in actual.items],
    }
    if not expected.reorderable:
        return [
            fail(
                "placeholder_reorder_unsupported",
                "Placeholders were reordered, but this syntax cannot express reordering (number them, e.g. %1$s).",
                **order,
                **context,
            )
        ]
    if not allow_reorder:
        return [
            fail(
                "placeholder_reordered",
                "Placeholders were reordered; this case forbids it.",
                **order,
                **context,
            )
        ]
    return []


def check_flat(
    source: str, text: str, tokenize: Callable[[str], Tokens], *, allow_reorder: bool
) -> list[Finding]:
    """Compare a flat-syntax source and candidate; a pass is one ``ok`` finding."""
    expected = tokenize(source)
    try:
        actual = tokenize(text)
    except PlaceholderSyntaxError as exc:
        return [fail("placeholder_malformed", f"The translation is malformed: {exc}.", detail=str(exc))]
    findings = compare_tokens(expected, actual, allow_reorder=allow_reorder)
    return findings or [ok("Every placeholder is preserved.", placeholders=[p.text for p in expected.items])]


def _percent_positions(text: str) -> list[int]:
    """Offsets of '%' that start a directive (``%%`` escapes skipped)."""
    positions: list[int] = []
    i = 0
    while i < len(text):
        if text[i] == "%":
            if text.startswith("%%", i):
                i += 2
                continue
            positions.append(i)
        i += 1
    return positions


def _text_of(items: Sequence[Placeholder], key: str) -> str:
    return next(p.text for p in items if p.key == key)


def _mutated(expected: str, actual: str, context: dict[str, str]) -> Finding:
    return fail(
        "placeholder_mutated",
        f"Placeholder {expected} was changed to {actual}.",
        expected=expected,
        actual=actual,
        **context,
    )
