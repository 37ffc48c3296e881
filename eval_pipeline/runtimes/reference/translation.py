"""The reference runtime's translator: deterministic pseudo-localization.

Text is accented and expanded (every vowel doubled), grouped or decimal numbers are rewritten
with the target locale's separators, and everything a translation must keep is left alone:
the tokens the request lists, printf / python / brace placeholders and their escapes, and
in ICU messages the whole argument structure, with plural branches rebuilt for the target
locale's CLDR categories. Batches are answered in the protocol, terminator included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from babel.numbers import format_decimal

from eval_pipeline.i18n.icu import PLURAL_TYPES, Node, parse_icu
from eval_pipeline.i18n.locales import babel_locale, number_symbols, ordinal_categories, plural_categories
from eval_pipeline.i18n.placeholders import PlaceholderSyntaxError
from eval_pipeline.i18n.prompts import TranslationRequest, parse_request
from eval_pipeline.i18n.protocol import render_batch
from eval_pipeline.runtimes.base import TurnResponse

_ACCENTED = str.maketrans(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "àƀçđéƒĝĥîĵķļɱñöþǫŕšţûṽŵẋýžÀƁÇĐÉƑĜĤÎĴĶĻṀÑÖÞǪŔŠŢÛṼŴẊÝŽ",
)
_VOWEL = re.compile(r"([aeiouAEIOU])")
_FLAT_PLACEHOLDER = (
    r"%%|%\([^()]+\)[-+ 0#]*\d*(?:\.\d+)?[a-zA-Z]"
    r"|%(?:[1-9]\d*\$)?[-+ 0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspn@]"
    r"|\{\{|\}\}|\{[^{}]*\}"
)
_CLDR_ORDER = ("zero", "one", "two", "few", "many", "other")


def answer_translation(prompt: str) -> TurnResponse | None:
    """The reference answer to a translation request, or None when ``prompt`` is not one."""
    request = parse_request(prompt)
    if request is None:
        return None
    translated = [pseudo_localize(item, request) for item in request.items]
    if request.batch:
        surface = render_batch(translated) + (f"\n{request.terminator}" if request.terminator else "")
    else:
        surface = translated[0]
    return TurnResponse(surface=surface, grounding_source="none", surface_tag="translation")


def pseudo_localize(text: str, request: TranslationRequest) -> str:
    if request.syntax == "icu":
        try:
            return _icu_message(parse_icu(text), request, plural=False)
        except PlaceholderSyntaxError:
            pass
    protected = "|".join(
        [*(re.escape(k) for k in sorted(request.keep, key=len, reverse=True)), _FLAT_PLACEHOLDER]
    )
    pieces = re.split(f"({protected})", text)
    # re.split puts the separators (the protected spans) at odd indices.
    return "".join(piece if i % 2 else _text(piece, request) for i, piece in enumerate(pieces))


def _text(run: str, request: TranslationRequest) -> str:
    run = _regroup_numbers(run, request.source_locale, request.target_locale)
    return _VOWEL.sub(r"\1\1", run).translate(_ACCENTED)


def _regroup_numbers(run: str, source_locale: str, target_locale: str) -> str:
    source_groups, source_decimal = number_symbols(source_locale)
    _, target_decimal = number_symbols(target_locale)
    group = "|".join(re.escape(g) for g in source_groups)
    pattern = re.compile(
        rf"(?<![\w])(\d{{1,3}}(?:(?:{group})\d{{3}})+|\d+)(?:{re.escape(source_decimal)}(\d+))?(?!\d)"
    )

    def local(match: re.Match[str]) -> str:
        whole, frac = match.group(1), match.group(2)
        if frac is None and whole.isdigit():
            return match.group(0)  # a plain digit run (a year, a level) stays as written
        digits = "".join(ch for ch in whole if ch.isdigit())
        integer = format_decimal(Decimal(digits), locale=babel_locale(target_locale))
        return integer + (f"{target_decimal}{frac}" if frac is not None else "")

    return pattern.sub(local, run)


def _icu_message(nodes: Sequence[Node], request: TranslationRequest, *, plural: bool) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, str):
            out.append(_icu_text(_text(node, request), plural=plural))
        else:
            out.append(_icu_argument(node, request))
    return "".join(out)


def _icu_text(text: str, *, plural: bool) -> str:
    text = text.replace("'", "''")
    for special in ("{", "}", *(("#",) if plural else ())):
        text = text.replace(special, f"'{special}'")
    return text


def _icu_argument(node: Mapping[str, Any], request: TranslationRequest) -> str:
    if node.get("hash"):
        return "#"
    name, kind = str(node["name"]), node.get("type")
    if kind is None:
        return "{" + name + "}"
    if "options" not in node:
        return (
            "{" + ", ".join([name, str(kind), *([str(node["format"])] if node.get("format") else [])]) + "}"
        )
    options: dict[str, list[Node]] = node["options"]
    if kind in PLURAL_TYPES:
        categories = plural_categories if kind == "plural" else ordinal_categories
        wanted = categories(request.target_locale)
        keys = [k for k in options if k.startswith("=")] + [c for c in _CLDR_ORDER if c in wanted]
        branches = {k: options.get(k, options["other"]) for k in keys}
    else:
        branches = dict(options)
    offset = f" offset:{node['offset']}" if node.get("offset") else ""
    body = " ".join(
        f"{key} {{{_icu_message(branch, request, plural=kind in PLURAL_TYPES)}}}"
        for key, branch in branches.items()
    )
    return "{" + f"{name}, {kind},{offset} {body}" + "}"
