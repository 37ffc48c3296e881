"""Checks of command-line arguments that typer's types cannot express (pure functions)."""

from __future__ import annotations

import re
from datetime import date

import typer

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def partition_day(text: str, *, first: date, last: date) -> str:
    """``text`` as a partition day ``YYYY-MM-DD`` between ``first`` and ``last``; else BadParameter (exit 2)."""
    if not _DAY.fullmatch(text):
        raise typer.BadParameter(f"{text!r} is not a date; expected YYYY-MM-DD", param_hint="--date")
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a calendar date", param_hint="--date") from None
    if not first <= day <= last:
        raise typer.BadParameter(
            f"{text} is outside the partitions: expected a day from {first} to {last}", param_hint="--date"
        )
    return text
