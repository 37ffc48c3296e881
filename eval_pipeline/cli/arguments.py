"""Checks of command-line arguments that typer's types cannot express (pure functions)."""

from __future__ import annotations

import re
from datetime import date

import typer

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def run_night(text: str, *, latest: date) -> str:
    """``text`` as the night a run is filed under (``YYYY-MM-DD``, not after ``latest``); else
    BadParameter (exit 2). Past nights are fine: re-scoring a recorded night files it there."""
    if not _DAY.fullmatch(text):
        raise typer.BadParameter(f"{text!r} is not a date; expected YYYY-MM-DD", param_hint="--date")
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a calendar date", param_hint="--date") from None
    if day > latest:
        raise typer.BadParameter(
            f"{text} has not happened yet: expected a day up to {latest}", param_hint="--date"
        )
    return text
