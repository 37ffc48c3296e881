"""The verdict vocabulary's colours, shared by the terminal (rich styles) and the HTML report (CSS),
so a word looks the same wherever it is read."""

from __future__ import annotations

from collections.abc import Mapping

from eval_pipeline.metrics import VerdictWord

VERDICT_COLOURS: Mapping[VerdictWord, str] = {
    "pass": "#1b7f3b",
    "fail": "#b00020",
    "warn": "#b26a00",
    "void": "#6a1b9a",
    "n/a": "#757575",
}


def rich_style(word: str) -> str:
    """The rich style of a verdict word (bold for the ones that need action)."""
    colour = VERDICT_COLOURS.get(word, VERDICT_COLOURS["n/a"])  # type: ignore[call-overload]
    return f"bold {colour}" if word in ("fail", "void") else colour


def css_rules() -> str:
    """One CSS class per verdict word (``n/a`` is ``.na``)."""
    return "\n".join(
        f".{css_class(word)} {{ color: {colour};{' font-weight: bold;' if word in ('fail', 'void') else ''} }}"
        for word, colour in VERDICT_COLOURS.items()
    )


def css_class(word: str) -> str:
    return "na" if word == "n/a" else word
