"""Small markdown tables for asset and check metadata in the Dagster UI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd


def _cell(value: Any) -> str:
    if value is None or (not isinstance(value, (list, tuple)) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(
    rows: Sequence[Mapping[Any, Any]], columns: Sequence[str], *, limit: int, more: str
) -> str:
    """A markdown table of ``columns``; beyond ``limit`` rows, a line saying how many more (``more``)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"\n…and {len(rows) - limit} more {more}.")
    return "\n".join(lines)
