"""Locale tags and the CLDR facts (via Babel) the assertions need: plural categories, number symbols."""

from __future__ import annotations

import re
from functools import cache

from babel import Locale, UnknownLocaleError
from babel.numbers import get_decimal_symbol, get_group_symbol

# language (2-3 lowercase letters), optional Script (Titlecase), optional REGION or UN M.49 digits.
CANONICAL_TAG = re.compile(r"^[a-z]{2,3}(?:-[A-Z][a-z]{3})?(?:-(?:[A-Z]{2}|\d{3}))?$")

# Group separators that render alike: a text written with any of them groups the same way.
_GROUP_VARIANTS: dict[str, tuple[str, ...]] = {
    "\u202f": ("\u202f", "\u00a0", " "),
    "\u00a0": ("\u00a0", "\u202f", " "),
    " ": (" ", "\u00a0", "\u202f"),
    "'": ("'", "’"),
    "’": ("’", "'"),
}


def canonical_form(tag: str) -> str:
    """The canonical spelling of a BCP-47-style tag (``zh-hans`` → ``zh-Hans``, ``en_us`` → ``en-US``)."""
    parts = tag.replace("_", "-").split("-")
    out = [parts[0].lower()]
    for part in parts[1:]:
        if len(part) == 4 and part.isalpha():
            out.append(part.title())
        else:
            out.append(part.upper())
    return "-".join(out)


def locale_problem(tag: str) -> str | None:
    """Why ``tag`` is not a canonical, known locale tag; None when it is."""
    if not CANONICAL_TAG.match(tag):
        canonical = canonical_form(tag)
        hint = f"; did you mean {canonical!r}?" if CANONICAL_TAG.match(canonical) else ""
        return f"{tag!r} is not a canonical BCP-47-style tag (language[-Script][-REGION], e.g. 'en-US', 'zh-Hans'){hint}"
    try:
        babel_locale(tag)
    except (UnknownLocaleError, ValueError):
        return f"{tag!r} is not a locale CLDR knows"
    return None


@cache
def babel_locale(tag: str) -> Locale:
    return Locale.parse(tag, sep="-")


@cache
def plural_categories(tag: str) -> frozenset[str]:
    """CLDR cardinal plural categories of a locale, ``other`` included (zh-Hans: only ``other``)."""
    return frozenset(babel_locale(tag).plural_form.tags) | {"other"}


@cache
def ordinal_categories(tag: str) -> frozenset[str]:
    """CLDR ordinal plural categories of a locale, ``other`` included."""
    return frozenset(babel_locale(tag).ordinal_form.tags) | {"other"}


@cache
def number_symbols(tag: str) -> tuple[tuple[str, ...], str]:
    """(group separators that count as this locale's grouping, decimal separator)."""
    locale = babel_locale(tag)
    group = get_group_symbol(locale)
    return _GROUP_VARIANTS.get(group, (group,)), get_decimal_symbol(locale)
