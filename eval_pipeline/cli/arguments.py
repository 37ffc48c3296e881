"""Choices of command-line arguments shared by a command and the module that does its work, and
checks that typer's types cannot express (pure functions)."""

from __future__ import annotations

import math
import re
from datetime import date
from enum import StrEnum
from pathlib import Path

import typer

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class OutputFormat(StrEnum):
    """``--format`` of the history commands."""

    table = "table"
    csv = "csv"
    json = "json"


class Executor(StrEnum):
    """``run --executor``."""

    in_process = "in_process"
    celery = "celery"


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


def local_folder(text: str, option: str) -> str:
    """``text`` unless it names an existing local path that is not a folder (a history root, a
    report folder): that is BadParameter (exit 2) before anything runs, not a failure after it."""
    if "://" not in text and Path(text).exists() and not Path(text).is_dir():
        raise typer.BadParameter(f"{text!r} is a file; expected a folder", param_hint=option)
    return text


def finite_amount(value: float | None) -> float | None:
    """``value`` (``--max-cost``) unless it is no finite amount (``inf``, ``1e999``, ``nan``):
    that is BadParameter (exit 2), since no run could ever reach it."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(
            f"{value} is not a finite amount; expected a number such as 2.50", param_hint="--max-cost"
        )
    return value
