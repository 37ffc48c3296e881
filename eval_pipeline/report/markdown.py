"""Small markdown tables for asset and check metadata in the Dagster UI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from eval_pipeline.metrics import number_text

# Every ASCII punctuation character CommonMark lets a backslash escape and that could start
# markup: emphasis, code, links and images, tables, headings, lists, strikethrough.
_MARKDOWN_PUNCTUATION = frozenset("\\`*_{}[]()#+-.!|~:")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}


def escape_markdown(text: str) -> str:
    """``text`` shown literally in markdown: no HTML, links, images, emphasis or table cells of its own."""
    out: list[str] = []
    for char in text:
        if char in _HTML:
            out.append(_HTML[char])
        elif char in _MARKDOWN_PUNCTUATION:
            out.append("\\" + char)
        elif char in "\r\n\u2028\u2029\x85":
            out.append(" ")  # a line break would end the table row
        else:
            out.append(char)
    return "".join(out)


def _cell(value: Any) -> str:
    if value is None or (not isinstance(value, (list, tuple)) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return number_text(value)
    return escape_markdown(str(value))


def markdown_table(
    rows: Sequence[Mapping[Any, Any]],
    columns: Sequence[str],
    *,
    limit: int,
    more: str,
    total: int | None = None,
) -> str:
    """A markdown table of ``columns``; beyond ``limit`` rows, a line saying how many more (``more``).
    ``total``: how many rows the table stands for, when ``rows`` holds only the first of them."""
    lines = ["| " + " | ".join(escape_markdown(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows[:limit]]
    shown = min(len(rows), limit)
    if (total if total is not None else len(rows)) > shown:
        lines.append(
            f"\n…and {(total if total is not None else len(rows)) - shown} more {escape_markdown(more)}."
        )
    return "\n".join(lines)
