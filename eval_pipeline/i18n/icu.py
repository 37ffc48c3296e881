"""ICU MessageFormat placeholders: arguments, keywords, ``#`` and branches, compared branch by branch.

Parsing is pyicumessageformat's. The source is parsed strictly. The candidate is parsed
loosely (unknown argument types and a missing ``other`` are accepted) so that a translated
keyword or a dropped branch is reported as what it is, not as a bare syntax error.

Plural (and selectordinal) branches follow the *target* locale's CLDR categories: a zh-Hans
translation rightly keeps only ``other``. Each candidate branch is compared with the source
branch of the same category, or with the source's ``other`` when the source has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyicumessageformat import Parser

from eval_pipeline.i18n.locales import ordinal_categories, plural_categories
from eval_pipeline.i18n.placeholders import Placeholder, PlaceholderSyntaxError, Tokens, compare_tokens
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
    findings = _compare_level(expected, actual, target_locale, allow_reorder, path="")
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


def _arguments(nodes: Sequence[Node]) -> list[dict[str, Any]]:
    return [n for n in nodes if isinstance(n, dict)]


def _tokens(nodes: Sequence[Node]) -> Tokens:
    items = tuple(
        Placeholder("#" if n.get("hash") else str(n["name"]), signature(n)) for n in _arguments(nodes)
    )
    return Tokens(items, reorderable=True)


def _compare_level(
    expected: Sequence[Node], actual: Sequence[Node], locale: str, allow_reorder: bool, path: str
) -> list[Finding]:
    findings = compare_tokens(_tokens(expected), _tokens(actual), allow_reorder=allow_reorder, where=path)
    by_name = {str(n["name"]): n for n in _arguments(actual) if not n.get("hash")}
    keyword_changes: set[str] = set()
    for exp_node in _arguments(expected):
        if exp_node.get("hash"):
            continue
        name = str(exp_node["name"])
        act_node = by_name.get(name)
        if act_node is None:
            continue
        exp_type, act_type = exp_node.get("type"), act_node.get("type")
        if exp_type != act_type and (exp_type in KEYWORDS or act_type is not None):
            keyword_changes.add(signature(exp_node))
            findings.append(
                fail(
                    "icu_keyword_mutated",
                    f"Argument {name!r} has type {act_type!r}; the source's ICU keyword is {exp_type!r} (keywords are not translated).",
                    argument=name,
                    expected=exp_type,
                    actual=act_type,
                    **({"where": path} if path else {}),
                )
            )
        elif exp_type in BRANCHING_TYPES:
            findings.extend(_compare_branches(exp_node, act_node, locale, allow_reorder, f"{path}{name}"))
    # A changed keyword is reported once, by its own code.
    return [
        f
        for f in findings
        if not (f.code == "placeholder_mutated" and f.evidence.get("expected") in keyword_changes)
    ]


def _compare_branches(
    expected: Mapping[str, Any], actual: Mapping[str, Any], locale: str, allow_reorder: bool, path: str
) -> list[Finding]:
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
                findings.append(_branch_extra(key, path, "the source has no such exact-value branch"))
            elif not key.startswith("=") and key not in categories:
                findings.append(
                    fail(
                        "icu_plural_category_invalid",
                        f"Branch {key!r} of {path!r} is not a {locale} plural category ({', '.join(sorted(categories))}).",
                        argument=path,
                        branch=key,
                        allowed=sorted(categories),
                    )
                )
    else:
        required = sorted(exp_options)
        findings.extend(
            _branch_extra(key, path, "the source has no such select branch")
            for key in act_options
            if key not in exp_options
        )
    for key in required:
        if key not in act_options:
            findings.append(
                fail(
                    "icu_branch_missing", f"Branch {key!r} of {path!r} is missing.", argument=path, branch=key
                )
            )
    for key, act_nodes in act_options.items():
        exp_nodes = exp_options.get(key, exp_options.get("other"))
        if exp_nodes is None or (kind in PLURAL_TYPES and key.startswith("=") and key not in exp_options):
            continue
        if kind == "select" and key not in exp_options:
            continue
        findings.extend(_compare_level(exp_nodes, act_nodes, locale, allow_reorder, f"{path}[{key}]."))
    return findings


def _branch_extra(key: str, path: str, why: str) -> Finding:
    return fail("icu_branch_extra", f"Branch {key!r} of {path!r} is extra: {why}.", argument=path, branch=key)


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
