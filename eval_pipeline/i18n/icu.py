"""ICU MessageFormat placeholders: arguments, keywords, ``#`` and branches, compared branch by branch.

Arguments are occurrences, not names: ``{n, plural}`` twice, or ``{n, plural}`` and
``{n, number}``, are separate occurrences, paired with the translation's as multisets keyed by
signature (name, type, style), the k-th with the k-th; each pair's branches are compared. A
finding names the occurrence (``2nd {n, plural}``) and the branch path down to it.

Parsing is pyicumessageformat's. The source is parsed strictly. The candidate is parsed
loosely (unknown argument types and a missing ``other`` are accepted) so that a translated
keyword or a dropped branch is reported as what it is, not as a bare syntax error.

Plural (and selectordinal) branches follow the *target* locale's CLDR categories: a zh-Hans
translation rightly keeps only ``other``. Each candidate branch is compared with the source
branch of the same category, or with the source's ``other`` when the source has none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pyicumessageformat import Parser

from eval_pipeline.i18n.locales import ordinal_categories, plural_categories
from eval_pipeline.i18n.placeholders import (
    Placeholder,
    PlaceholderSyntaxError,
    Tokens,
    mutated_finding,
    pair_tokens,
    pairing_findings,
)
from eval_pipeline.i18n.results import Finding, fail, ok

Node = str | dict[str, Any]

PLURAL_TYPES = frozenset({"plural", "selectordinal"})
BRANCHING_TYPES = frozenset({"plural", "selectordinal", "select"})
KEYWORDS = frozenset(
    {"plural", "selectordinal", "select", "number", "date", "time", "spellout", "ordinal", "duration"}
)

_STRICT = Parser()
_LOOSE = Parser({"loose_submessages": True, "require_other": False})


def parse_icu(text: str, *, strict: bool = True) -> list[Node]:
    """The message's AST; raises PlaceholderSyntaxError when it does not parse."""
    try:
        return list((_STRICT if strict else _LOOSE).parse(text))
    except SyntaxError as exc:
        raise PlaceholderSyntaxError(f"not valid ICU MessageFormat: {exc}") from None


def check_icu(source: str, text: str, target_locale: str, *, allow_reorder: bool) -> list[Finding]:
    expected = parse_icu(source)
    try:
        actual = parse_icu(text, strict=False)
    except PlaceholderSyntaxError as exc:
        return [fail("placeholder_malformed", f"The translation is malformed: {exc}.", detail=str(exc))]
    findings = _compare_level(expected, actual, target_locale, allow_reorder, where="")
    if findings:
        return findings
    return [
        ok("Every ICU argument, keyword, # and branch is preserved.", arguments=_argument_names(expected))
    ]


def signature(node: Mapping[str, Any]) -> str:
    """How an argument is identified when compared: name, type, style; branches compared separately."""
    if node.get("hash"):
        return "#"
    parts = [str(node["name"])]
    if "type" in node:
        parts.append(str(node["type"]))
    if node.get("offset"):
        parts.append(f"offset:{node['offset']}")
    if "options" in node:
        parts.append("…")
    elif node.get("format"):
        parts.append(str(node["format"]))
    return "{" + ", ".join(parts) + "}"


def label(node: Mapping[str, Any]) -> str:
    """How people name an argument: ``{n, plural}``, ``{n, number, integer}``, ``{n}``, ``#``."""
    if node.get("hash"):
        return "#"
    parts = [str(node["name"]), *(str(node[field]) for field in ("type", "format") if node.get(field))]
    return "{" + ", ".join(parts) + "}"


def _arguments(nodes: Sequence[Node]) -> list[dict[str, Any]]:
    return [n for n in nodes if isinstance(n, dict)]


def _tokens(arguments: Sequence[Mapping[str, Any]]) -> Tokens:
    """Identity is the signature (name, type, style); the name ties a changed keyword to its argument."""
    items = tuple(
        Placeholder(signature(n), signature(n), name="#" if n.get("hash") else str(n["name"]))
        for n in arguments
    )
    return Tokens(items, reorderable=True)


def occurrence_labels(arguments: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each argument's label, prefixed with its position among the level's arguments of the same
    signature when there are several: ``2nd {n, plural}``."""
    signatures = [signature(n) for n in arguments]
    totals = Counter(signatures)
    seen: Counter[str] = Counter()
    labels: list[str] = []
    for node, sig in zip(arguments, signatures, strict=True):
        seen[sig] += 1
        labels.append(f"{ordinal(seen[sig])} {label(node)}" if totals[sig] > 1 else label(node))
    return labels


def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _compare_level(
    expected: Sequence[Node], actual: Sequence[Node], locale: str, allow_reorder: bool, where: str
) -> list[Finding]:
    """One message level (``where`` names the branch it is, ``""`` at the top): its arguments
    paired as occurrences (see :func:`pair_tokens`), then the branches of every pair of
    plural/select occurrences compared, pair by pair."""
    exp_args, act_args = _arguments(expected), _arguments(actual)
    pairing = pair_tokens(_tokens(exp_args), _tokens(act_args))
    labels = occurrence_labels(exp_args)
    argument_paths = [f"{where} / {label}" if where else label for label in labels]
    context = {"where": where} if where else {}

    def rewrite_finding(i: int, j: int) -> Finding:
        exp_node, act_node = exp_args[i], act_args[j]
        exp_type, act_type = exp_node.get("type"), act_node.get("type")
        same_argument = pairing.expected.items[i].argument == pairing.actual.items[j].argument
        keyword_changed = exp_type != act_type and (exp_type in KEYWORDS or act_type is not None)
        if not (same_argument and keyword_changed):
            return mutated_finding(
                signature(exp_node), signature(act_node), {**context, "occurrence": labels[i]}
            )
        return fail(
            "icu_keyword_mutated",
            f"Argument {argument_paths[i]} is written with type {act_type!r}; the source's ICU keyword is {exp_type!r} (keywords are not translated).",
            argument=str(exp_node["name"]),
            occurrence=labels[i],
            expected=exp_type,
            actual=act_type,
            **context,
        )

    findings = pairing_findings(
        pairing, allow_reorder=allow_reorder, context=context, rewrite_finding=rewrite_finding
    )
    for i, j in pairing.kept + pairing.rewritten:
        exp_type = exp_args[i].get("type")
        if exp_type in BRANCHING_TYPES and act_args[j].get("type") == exp_type:
            findings.extend(
                _compare_branches(
                    exp_args[i], act_args[j], locale, allow_reorder, argument_paths[i], labels[i]
                )
            )
    return findings


def _compare_branches(
    expected: Mapping[str, Any],
    actual: Mapping[str, Any],
    locale: str,
    allow_reorder: bool,
    argument: str,
    occurrence: str,
) -> list[Finding]:
    """The branches of one paired plural/select occurrence; ``argument`` is its path, ``occurrence``
    its label at its own level."""
    about = {"argument": argument, "occurrence": occurrence}
    exp_options: dict[str, list[Node]] = expected["options"]
    act_options: dict[str, list[Node]] = actual["options"]
    kind = expected["type"]
    findings: list[Finding] = []
    if kind in PLURAL_TYPES:
        categories = plural_categories(locale) if kind == "plural" else ordinal_categories(locale)
        exact = {k for k in exp_options if k.startswith("=")}
        required = sorted(categories | exact)
        for key in act_options:
            if key.startswith("=") and key not in exact:
                findings.append(_branch_extra(key, about, "the source has no such exact-value branch"))
            elif not key.startswith("=") and key not in categories:
                findings.append(
                    fail(
                        "icu_plural_category_invalid",
                        f"Branch {key!r} of {argument} is not a {locale} plural category ({', '.join(sorted(categories))}).",
                        branch=key,
                        **about,
                        allowed=sorted(categories),
                    )
                )
    else:
        required = sorted(exp_options)
        findings.extend(
            _branch_extra(key, about, "the source has no such select branch")
            for key in act_options
            if key not in exp_options
        )
    for key in required:
        if key not in act_options:
            findings.append(
                fail("icu_branch_missing", f"Branch {key!r} of {argument} is missing.", branch=key, **about)
            )
    for key, act_nodes in act_options.items():
        exp_nodes = exp_options.get(key, exp_options.get("other"))
        if exp_nodes is None or (kind in PLURAL_TYPES and key.startswith("=") and key not in exp_options):
            continue
        if kind == "select" and key not in exp_options:
            continue
        findings.extend(_compare_level(exp_nodes, act_nodes, locale, allow_reorder, f"{argument}[{key}]"))
    return findings


def _branch_extra(key: str, about: Mapping[str, str], why: str) -> Finding:
    message = f"Branch {key!r} of {about['argument']} is extra: {why}."
    return fail("icu_branch_extra", message, branch=key, **about)


def _argument_names(nodes: Sequence[Node]) -> list[str]:
    names: list[str] = []
    for node in _arguments(nodes):
        if node.get("hash"):
            continue
        if str(node["name"]) not in names:
            names.append(str(node["name"]))
        for branch in node.get("options", {}).values():
            names.extend(n for n in _argument_names(branch) if n not in names)
    return names
