"""The one definition of a flaky verdict, within a run (its samples) and across runs (nights).

A *flip* is a change of a verdict between two consecutive verdicts of the same case
predicate: consecutive samples of one run (ordered by ``sample_index``) or consecutive runs
of one series (ordered by their position in it). Null verdicts (not applicable) are
skipped, so a case that was not applicable in between does not flip. A verdict sequence's
flip rate is flips / transitions, null when it holds fewer than two verdicts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Flips:
    """What a sequence of verdicts says about its flakiness."""

    verdicts: int
    transitions: int
    flips: int

    @property
    def flip_rate(self) -> float | None:
        return self.flips / self.transitions if self.transitions else None


def count_flips(verdicts: Iterable[bool | None]) -> Flips:
    """Flips of a sequence of verdicts, in order; null (not applicable) verdicts are skipped."""
    seen = [bool(v) for v in verdicts if v is not None and not pd.isna(v)]
    flips = sum(1 for before, after in itertools.pairwise(seen) if before != after)
    return Flips(len(seen), max(len(seen) - 1, 0), flips)
