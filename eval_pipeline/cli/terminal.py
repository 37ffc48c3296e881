"""Tables for a terminal: what a history-family table shows by default so it fits 100 columns.

A pure function over the rows: keep the command's default columns (``--wide`` keeps all),
shorten run ids to their first 8 characters (any unique prefix names a run), timestamps to the
minute, and lift a column whose value is the same on every row into the title
(``lane deterministic_fluency``), where it is said once. CSV and JSON are never shortened.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from eval_pipeline.cli.common import SHORT_ID
from eval_pipeline.history.runs import is_missing

# Columns that hold run ids (shown shortened).
RUN_ID_COLUMNS = frozenset({"run_id", "run_a", "run_b", "previous_run_id"})
# Columns that say *where* a row is from: lifted into the title when constant.
CONTEXT_COLUMNS = ("lane", "split", "runtime", "case_set", "date")


def terminal_view(
    rows: pd.DataFrame, columns: Sequence[str] | None, *, wide: bool
) -> tuple[pd.DataFrame, list[str]]:
    """The rows to print and the ``name value`` notes to add to the title."""
    view = rows.copy()
    if wide:
        return view, []
    if columns is not None:
        view = view[[c for c in columns if c in view.columns]]
    notes = []
    if len(view) > 1:
        for column in CONTEXT_COLUMNS:
            if column in view.columns and view[column].astype(str).nunique(dropna=False) == 1:
                notes.append(f"{column} {_day_or_text(view[column].iloc[0])}")
                view = view.drop(columns=[column])
    for column in view.columns:
        if column in RUN_ID_COLUMNS:
            view[column] = [None if is_missing(v) else str(v)[:SHORT_ID] for v in view[column]]
        elif pd.api.types.is_datetime64_any_dtype(view[column]) and getattr(view[column].dt, "tz", None):
            view[column] = view[column].dt.strftime("%Y-%m-%d %H:%M")
    return view, notes


def _day_or_text(value: object) -> str:
    if isinstance(value, pd.Timestamp):
        return value.date().isoformat()
    return str(value)
