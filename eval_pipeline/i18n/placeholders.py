"""Placeholder tokens per syntax (printf, python, custom), auto detection, and the comparison
of expected against actual tokens by identity, multiplicity and order.

ICU MessageFormat is structured rather than flat; it lives in :mod:`eval_pipeline.i18n.icu`.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    """One placeholder occurrence. ``key`` is its identity; ``text`` is how it is written.

    ``name`` is the argument it stands for when several identities share one (ICU: ``{n, plural}``
    and ``{n, number}``); occurrences of one name with different keys are one placeholder
    rewritten. By default the key is the name.
    """

    key: str
    text: str
    name: str | None = None

    @property
    def argument(self) -> str:
        return self.key if self.name is None else self.name


@dataclass(frozen=True)
class Tokens:
    """The placeholders of one text, in order, and whether this syntax can express reordering."""

    items: tuple[Placeholder, ...]
    reorderable: bool


def printf_tokens(text: str) -> Tokens:
    """printf directives: flags, width, precision, length, positional ``%1$s``; ``%%`` is a literal."""
    items: list[Placeholder] = []
    for match in _percent_directives(text, _PRINTF_DIRECTIVE, "printf"):
        index = match.group("index")
        items.append(Placeholder(f"%{index}$" if index else match.group(0), match.group(0)))
    positional = [p.key.endswith("$") for p in items]
    if any(positional) and not all(positional):
        raise PlaceholderSyntaxError("mixes positional (%1$s) and unnumbered (%s) printf directives")
    return Tokens(tuple(items), reorderable=all(positional))


def percent_named_tokens(text: str) -> Tokens:
    """Python ``%(name)s`` directives; ``%%`` is a literal; any other ``%`` is malformed."""
    items = [
        Placeholder(match.group("name"), match.group(0))
        for match in _percent_directives(text, _PERCENT_NAMED, "%(name)s")
    ]
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


@dataclass(frozen=True)
class TokenPairing:
    """Which placeholder occurrence of the source answers to which of the translation.

    Indexes are positions in ``expected.items`` / ``actual.items``. ``kept`` pairs are written
    identically; ``rewritten`` pairs are the same placeholder written differently (a changed
    conversion, ICU keyword or style, or a rename in the same slot); ``missing`` and ``extra``
    are the occurrences no pair accounts for.
    """

    expected: Tokens
    actual: Tokens
    kept: tuple[tuple[int, int], ...]
    rewritten: tuple[tuple[int, int], ...]
    missing: tuple[int, ...]
    extra: tuple[int, ...]


def pair_tokens(expected: Tokens, actual: Tokens) -> TokenPairing:
    """Pair occurrences as multisets keyed by identity: the k-th source occurrence of a key with the
    k-th of the translation (equal texts first). Left over: occurrences naming the same argument
    (a changed ICU keyword or style), then occurrences in the same slot whose keys the other side
    lacks entirely (a rename). An argument written as often as in the source but under other keys
    was rewritten in place, so its occurrences are paired by position first: the report then names
    the occurrence that changed, not a later one of the same key."""
    exp_items, act_items = expected.items, actual.items
    left_exp, left_act = list(range(len(exp_items))), list(range(len(act_items)))
    pairs: list[tuple[int, int]] = []

    def pair(i: int, j: int) -> None:
        pairs.append((i, j))
        left_exp.remove(i)
        left_act.remove(j)

    def first_unpaired(i: int, fits: Callable[[Placeholder, Placeholder], bool]) -> int | None:
        return next((j for j in left_act if fits(exp_items[i], act_items[j])), None)

    for name in dict.fromkeys(p.argument for p in exp_items):
        exp_of = [i for i in left_exp if exp_items[i].argument == name]
        act_of = [j for j in left_act if act_items[j].argument == name]
        exp_keys = Counter(exp_items[i].key for i in exp_of)
        if len(exp_of) == len(act_of) and exp_keys != Counter(act_items[j].key for j in act_of):
            for exp_index, act_index in zip(exp_of, act_of, strict=True):
                pair(exp_index, act_index)
    rules: tuple[Callable[[Placeholder, Placeholder], bool], ...] = (
        lambda e, a: e.key == a.key and e.text == a.text,
        lambda e, a: e.key == a.key,
        lambda e, a: e.argument == a.argument,
    )
    for fits in rules:
        for i in list(left_exp):
            match = first_unpaired(i, fits)
            if match is not None:
                pair(i, match)
    all_exp_keys, all_act_keys = {p.key for p in exp_items}, {p.key for p in act_items}
    if len(exp_items) == len(act_items):
        for i in [i for i in left_exp if i in left_act]:
            if exp_items[i].key not in all_act_keys and act_items[i].key not in all_exp_keys:
                pair(i, i)
    pairs.sort()
    return TokenPairing(
        expected,
        actual,
        kept=tuple((i, j) for i, j in pairs if exp_items[i].text == act_items[j].text),
        rewritten=tuple((i, j) for i, j in pairs if exp_items[i].text != act_items[j].text),
        missing=tuple(left_exp),
        extra=tuple(left_act),
    )


RewriteFinding = Callable[[int, int], Finding]


def pairing_findings(
    pairing: TokenPairing,
    *,
    allow_reorder: bool,
    context: Mapping[str, Any] | None = None,
    rewrite_finding: RewriteFinding | None = None,
) -> list[Finding]:
    """Identity and multiplicity first, then order. An empty list means nothing is wrong.

    ``context`` is added to every finding's evidence; ``rewrite_finding(i, j)`` describes a
    rewritten pair (by default ``placeholder_mutated``)."""
    expected, actual = pairing.expected.items, pairing.actual.items
    evidence = dict(context or {})
    exp_count = Counter(p.key for p in expected)
    act_count = Counter(p.key for p in actual)

    def mutated(i: int, j: int) -> Finding:
        return mutated_finding(expected[i].text, actual[j].text, evidence)

    describe = rewrite_finding or mutated
    # Inside an ICU branch, the message says which one: "… is missing (in 2nd {n, plural}[one])."
    inside = f" (in {evidence['where']})" if evidence.get("where") else ""
    findings = [describe(i, j) for i, j in pairing.rewritten]
    miscounted: set[str] = set()
    for side, indexes, items in (("missing", pairing.missing, expected), ("extra", pairing.extra, actual)):
        for key in dict.fromkeys(items[i].key for i in indexes):
            if exp_count[key] and act_count[key]:
                miscounted.add(key)
                continue
            text = _text_of(items, key)
            if side == "missing":
                message = f"Expected placeholder {text} is missing{inside}."
                findings.append(fail("placeholder_missing", message, expected=text, **evidence))
            else:
                message = f"Placeholder {text} is not in the source{inside}."
                findings.append(fail("placeholder_extra", message, actual=text, **evidence))
    for key in sorted(miscounted):
        text = _text_of(expected, key)
        findings.append(
            fail(
                "placeholder_count_mismatch",
                f"Placeholder {text} occurs {act_count[key]} time(s); the source has {exp_count[key]}{inside}.",
                placeholder=text,
                expected_count=exp_count[key],
                actual_count=act_count[key],
                **evidence,
            )
        )
    exp_order, act_order = [p.text for p in expected], [p.text for p in actual]
    if findings or exp_order == act_order:
        return sorted(findings, key=lambda f: (f.code, str(sorted(f.evidence.items()))))
    order = {"expected_order": exp_order, "actual_order": act_order}
    if not pairing.expected.reorderable:
        return [
            fail(
                "placeholder_reorder_unsupported",
                "Placeholders were reordered, but this syntax cannot express reordering (number them, e.g. %1$s).",
                **order,
                **evidence,
            )
        ]
    if not allow_reorder:
        return [
            fail(
                "placeholder_reordered",
                f"Placeholders were reordered{inside}; this case forbids it.",
                **order,
                **evidence,
            )
        ]
    return []


def compare_tokens(expected: Tokens, actual: Tokens, *, allow_reorder: bool) -> list[Finding]:
    """:func:`pairing_findings` of :func:`pair_tokens`: what is wrong, or nothing."""
    return pairing_findings(pair_tokens(expected, actual), allow_reorder=allow_reorder)


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


def _percent_directives(text: str, directive: re.Pattern[str], form: str) -> list[re.Match[str]]:
    """Every directive of ``text``, each '%' that starts one read by ``directive``; a '%' it
    does not read is malformed (a ``form`` directive was expected)."""
    matches: list[re.Match[str]] = []
    for position in _percent_positions(text):
        match = directive.match(text, position)
        if match is None:
            raise PlaceholderSyntaxError(
                f"'%' at offset {position} starts no {form} directive (write '%%' for a literal percent sign)"
            )
        matches.append(match)
    return matches


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


def mutated_finding(expected: str, actual: str, context: Mapping[str, Any]) -> Finding:
    """``placeholder_mutated``: the same slot written differently (``context`` joins the evidence)."""
    inside = f" (in {context['where']})" if context.get("where") else ""
    return fail(
        "placeholder_mutated",
        f"Placeholder {expected} was changed to {actual}{inside}.",
        expected=expected,
        actual=actual,
        **context,
    )
