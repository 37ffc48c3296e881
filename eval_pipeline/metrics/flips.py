"""The one definition of a flaky verdict, within a run (its samples) and across runs (nights).

A *flip* is a change of a verdict between two consecutive verdicts of the same case
predicate: consecutive samples of one run (ordered by ``sample_index``) or consecutive runs
of one series (ordered by their position in it). Null verdicts (not applicable) are
skipped, so a case that was not applicable in between does not flip. A verdict sequence's
flip rate is flips / transitions, null when it holds fewer than two verdicts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Flips:
    """What a sequence of verdicts says about its flakiness."""

    verdicts: int
    transitions: int
    flips: int

    @property
    def alternations(self) -> int:
        """Flips that undo the flip before them (each flip after the first, in a two-valued
        sequence): 0 for a step change (pass, pass, fail), 1 for pass, fail, pass."""
        return max(self.flips - 1, 0)

    @property
    def flip_rate(self) -> float | None:
        return self.flips / self.transitions if self.transitions else None


def count_flips(verdicts: Iterable[bool | None]) -> Flips:
    """Flips of a sequence of verdicts, in order; null (not applicable) verdicts are skipped."""
    seen = [bool(v) for v in verdicts if v is not None and not pd.isna(v)]
    flips = sum(1 for before, after in itertools.pairwise(seen) if before != after)
    return Flips(len(seen), max(len(seen) - 1, 0), flips)


def flips_by_group(verdicts: pd.DataFrame, keys: Sequence[str], order: str) -> pd.DataFrame:
    """:func:`count_flips` of every group of ``keys`` at once, its verdicts ordered by ``order``:
    one row per group holding a verdict, with ``verdicts``, ``passes``, ``transitions`` and ``flips``.

    The columnar form of the same definition (a test holds the two to each other): null
    verdicts are dropped, then a flip is a verdict unlike the one before it in its group."""
    seen = verdicts.loc[verdicts["passed"].notna(), [*keys, order, "passed"]]
    seen = seen.sort_values([*keys, order], kind="stable").reset_index(drop=True)
    passed = seen["passed"].to_numpy(dtype=bool)
    same_group = np.ones(len(seen), dtype=bool)
    same_group[:1] = False
    for key in keys:
        values = seen[key].to_numpy(dtype=object)
        same_group[1:] &= values[1:] == values[:-1]
    flipped = np.zeros(len(seen), dtype=bool)
    flipped[1:] = same_group[1:] & (passed[1:] != passed[:-1])
    grouped = seen.assign(_passed=passed.astype(int), _flipped=flipped.astype(int)).groupby(
        list(keys), sort=True, dropna=False
    )
    counted = grouped.agg(
        verdicts=("_passed", "size"), passes=("_passed", "sum"), flips=("_flipped", "sum")
    ).reset_index()
    counted["transitions"] = (counted["verdicts"] - 1).clip(lower=0)
    return counted
