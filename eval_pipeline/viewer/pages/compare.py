"""The compare page: two runs, lane split by lane split."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from eval_pipeline.history.diff import RunDiff, diff_pairs, pairs_to_diff
from eval_pipeline.viewer.pages.common import (
    NotFound,
    lane_runs,
)


@dataclass(frozen=True)
class ComparePage:
    run_a: str
    run_b: str
    diffs: list[RunDiff] = field(default_factory=list)


def compare_page(con: duckdb.DuckDBPyConnection, run_a: str, run_b: str) -> ComparePage:
    """Two runs, lane split by lane split: metric deltas and the flipped cases with both surfaces
    (:func:`eval_pipeline.history.diff.diff_pairs`, what ``diff`` and ``compare`` list)."""
    for run_id in (run_a, run_b):
        lane_runs(con, run_id)
    try:
        pairs = pairs_to_diff(con, run_a, run_b)
    except (KeyError, ValueError) as exc:
        raise NotFound(str(exc.args[0]) if exc.args else str(exc)) from None
    return ComparePage(run_a, run_b, diff_pairs(con, pairs))
