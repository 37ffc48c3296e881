"""The compare page: two runs, lane split by lane split, with what ``eval-pipeline compare``
prints (the paired test per metric, Holm-adjusted) and each flipped case's surfaces diffed."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Literal

import duckdb

from eval_pipeline.history.comparison import RunComparison, compare_as_declared
from eval_pipeline.history.diff import pairs_to_diff
from eval_pipeline.history.runs import is_missing
from eval_pipeline.viewer.pages.common import (
    NotFound,
    Preview,
    lane_runs,
)

DiffOp = Literal["same", "deleted", "inserted"]
Segment = tuple[DiffOp, str]


@dataclass(frozen=True)
class LaneComparison:
    """One lane split of the two runs: ``compare``'s result, and a word diff of each flip's
    surfaces (in its rows' order; None where a side has no surface), of their previews only."""

    result: RunComparison
    declared: bool  # this checkout declares the lane (else nothing is tested)
    surface_diffs: list[list[Segment] | None]

    @property
    def tested(self) -> bool:
        return any(m.paired is not None for m in self.result.metrics)


@dataclass(frozen=True)
class ComparePage:
    run_a: str
    run_b: str
    comparisons: list[LaneComparison] = field(default_factory=list)


def compare_page(con: duckdb.DuckDBPyConnection, run_a: str, run_b: str) -> ComparePage:
    """Two runs, lane split by lane split: :func:`eval_pipeline.history.comparison.compare_as_declared`
    (the figures ``compare`` prints: per-metric exact McNemar or bootstrap p-values, Holm-adjusted,
    the flipped cases with both surfaces), and a word diff of each flip's two surfaces."""
    for run_id in (run_a, run_b):
        lane_runs(con, run_id)
    try:
        pairs = pairs_to_diff(con, run_a, run_b)
    except (KeyError, ValueError) as exc:
        raise NotFound(str(exc.args[0]) if exc.args else str(exc)) from None
    comparisons = []
    for a, b in pairs:
        result, declared = compare_as_declared(con, a, b)
        diffs = [
            None
            if is_missing(before) or is_missing(after)
            else word_diff(Preview.of(str(before)).shown, Preview.of(str(after)).shown)
            for before, after in zip(result.flips["surface_a"], result.flips["surface_b"], strict=True)
        ]
        comparisons.append(LaneComparison(result, declared, diffs))
    return ComparePage(run_a, run_b, comparisons)


_WORDS = re.compile(r"\s+|[^\s]+")


def word_diff(before: str, after: str) -> list[Segment]:
    """``before`` turned into ``after``, word by word (whitespace kept as it is): runs both share,
    runs only ``before`` has (deleted) and runs only ``after`` has (inserted). A shared run of a
    single word (or only spaces) between two changes joins them, so a rewritten sentence reads
    as one deletion and one insertion rather than alternating word by word."""
    old, new = _WORDS.findall(before), _WORDS.findall(after)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    blocks = [  # (changed, old text, new text)
        (tag != "equal", "".join(old[i1:i2]), "".join(new[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    ]
    merged: list[tuple[bool, str, str]] = []
    for index, (changed, was, now) in enumerate(blocks):
        after_change = bool(merged) and merged[-1][0]
        joins = 0 < index < len(blocks) - 1 and len(was.split()) <= 1
        if after_change and (changed or joins):
            _, old_text, new_text = merged[-1]
            merged[-1] = (True, old_text + was, new_text + now)
        else:
            merged.append((changed, was, now))
    segments: list[Segment] = []
    for changed, was, now in merged:
        if not changed:
            segments.append(("same", was))
            continue
        if was:
            segments.append(("deleted", was))
        if now:
            segments.append(("inserted", now))
    return segments
