"""Tables for a terminal: what a history-family table shows so it reads at 100 columns.

Pure functions over the rows. :func:`terminal_view` keeps the command's default columns
(``--wide`` keeps all), shortens run ids to their first 8 characters (any unique prefix names a
run), timestamps to the minute, and lifts a column whose value is the same on every row into the
title (``lane deterministic_fluency``), where it is said once. :func:`fit` then makes the rest fit
the terminal's width without ever splitting a name (a lane, metric, case or predicate): prose
(reasons, surfaces, notes) goes under its row, where it wraps; a table still too wide is cut into
one table per series (lane, split, runtime, case set in its title), and then loses its last
columns, which the title names (``--wide`` shows them). CSV and JSON are never shortened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
from rich.cells import cell_len

from eval_pipeline.cli.common import SHORT_ID
from eval_pipeline.history.runs import is_missing

# Columns that hold run ids (shown shortened).
RUN_ID_COLUMNS = frozenset({"run_id", "run_a", "run_b", "previous_run_id"})
# Columns that say *where* a row is from: lifted into the title when constant.
CONTEXT_COLUMNS = ("lane", "split", "runtime", "case_set", "date")
# The context columns a table too wide is cut by: one table per series.
SERIES_COLUMNS = ("lane", "split", "runtime", "case_set")
# Prose: printed under its row, wrapped at words, never squeezed into a table cell.
TEXT_COLUMNS = frozenset(
    {
        "reason",
        "message",
        "note",
        "surface_a",
        "surface_b",
        "surface_before",
        "surface_after",
        "surface_change",
    }
)


def terminal_view(
    rows: pd.DataFrame, columns: Sequence[str] | None, *, wide: bool
) -> tuple[pd.DataFrame, list[str]]:
    """The rows to print and the ``name value`` notes to add to the title."""
    view = rows.copy()
    if wide:
        return view, []
    if columns is not None:
        view = view[[c for c in columns if c in view.columns]]
    notes: list[str] = []
    if len(view) > 1:
        view, notes = _lift_constants(view)
    for column in view.columns:
        if column in RUN_ID_COLUMNS:
            view[column] = [None if is_missing(v) else str(v)[:SHORT_ID] for v in view[column]]
        elif pd.api.types.is_datetime64_any_dtype(view[column]) and getattr(view[column].dt, "tz", None):
            view[column] = view[column].dt.strftime("%Y-%m-%d %H:%M")
    return view, notes


@dataclass(frozen=True)
class FittedTable:
    """One table to print: its title notes, the cells of its table columns (text), the prose
    columns printed under each row, and the columns left out for width."""

    notes: list[str]
    cells: pd.DataFrame
    texts: pd.DataFrame
    dropped: list[str] = field(default_factory=list)


def table_width(widths: Sequence[int]) -> int:
    """Columns a borderless table of these column widths takes (one space of padding each side
    of a cell, a space between columns, and the edges)."""
    return sum(widths) + 3 * len(widths) + 1 if widths else 0


def fit(cells: pd.DataFrame, notes: Sequence[str], *, width: int, wide: bool) -> list[FittedTable]:
    """The tables that show ``cells`` (every value already text) in ``width`` columns.

    With ``wide`` nothing is cut or dropped (only prose moves under its row)."""
    texts = cells[[c for c in cells.columns if c in TEXT_COLUMNS]]
    table = cells[[c for c in cells.columns if c not in TEXT_COLUMNS]]
    if wide or _width(table) <= width:
        return [FittedTable(list(notes), table, texts)]
    by = [c for c in SERIES_COLUMNS if c in table.columns]
    groups = [table] if not by else [group for _, group in table.groupby(by, sort=False, dropna=False)]
    fitted = []
    for group in groups:
        shown, lifted = _lift_constants(group) if len(groups) > 1 else (group, [])
        dropped: list[str] = []
        while _width(shown) > width and len(shown.columns) > 1:
            dropped.insert(0, str(shown.columns[-1]))
            shown = shown.iloc[:, :-1]
        fitted.append(FittedTable([*notes, *lifted], shown, texts.loc[group.index], dropped))
    return fitted


def record_heading(record: dict[str, str]) -> str:
    """A row's table cells as one line, when its prose is printed under it: the first two
    values bare (the row's names), the rest as ``column value``."""
    parts = [v if i < 2 else f"{k} {v}" for i, (k, v) in enumerate(record.items()) if v != ""]
    return " · ".join(parts)


def _width(table: pd.DataFrame) -> int:
    return table_width(
        [max([cell_len(str(c)), *(cell_len(v) for v in table[c].astype(str))]) for c in table.columns]
    )


def _lift_constants(view: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    notes: list[str] = []
    for column in CONTEXT_COLUMNS:
        if column in view.columns and view[column].astype(str).nunique(dropna=False) == 1:
            notes.append(f"{column} {_day_or_text(view[column].iloc[0])}")
            view = view.drop(columns=[column])
    return view, notes


def _day_or_text(value: object) -> str:
    if isinstance(value, pd.Timestamp):
        return value.date().isoformat()
    return str(value)
