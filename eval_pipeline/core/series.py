"""A series: what a run is compared with.

A **series** is one lane, split, runtime target (its name, see
:mod:`eval_pipeline.runtimes.targets`) and case set (the split's own files, named after the
split, or ``custom-<hash>`` for a case file given with ``--cases``). Every stored table carries
its four columns (:data:`SERIES_COLUMN_NAMES`); runs, outcomes and messages hold one
:class:`Series` and read its parts through it (:class:`OfSeries`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Series:
    lane: str
    split: str
    runtime: str  # the runtime target's name
    case_set: str  # the split's name, or custom-<sha256 prefix> for --cases

    @classmethod
    def from_row(cls, row: Any) -> Series:
        """The series of a table row holding the series' columns (a dict, a pandas row)."""
        lane, split, runtime, case_set = (str(row[name]) for name in SERIES_COLUMN_NAMES)
        return cls(lane, split, runtime, case_set)

    @classmethod
    def from_key(cls, key: str) -> Series:
        """The series a :attr:`key` names."""
        lane, split, runtime, case_set = key.split("/", 3)
        return cls(lane, split, runtime, case_set)

    @property
    def key(self) -> str:
        """``lane/split/runtime/case_set``: the series as one string (a run's series tag, what a
        notification is deduplicated by)."""
        return "/".join(self.params())

    @property
    def label(self) -> str:
        """``lane/split [runtime]``, plus ``{case_set}`` when it is not the split's own cases."""
        cases = "" if self.case_set == self.split else f" {{{self.case_set}}}"
        return f"{self.lane}/{self.split} [{self.runtime}]{cases}"

    def params(self) -> list[str]:
        """The values for :data:`SERIES_MATCH`: the series' columns in :data:`SERIES_COLUMN_NAMES` order."""
        return [self.lane, self.split, self.runtime, self.case_set]

    def columns(self) -> dict[str, str]:
        """The series' columns by name, in :data:`SERIES_COLUMN_NAMES` order."""
        return dict(zip(SERIES_COLUMN_NAMES, self.params(), strict=True))


SERIES_COLUMN_NAMES: tuple[str, ...] = tuple(field.name for field in fields(Series))
SERIES_SQL = ", ".join(SERIES_COLUMN_NAMES)  # SQL: the PARTITION BY / GROUP BY list of a series
SERIES_MATCH = " AND ".join(f"{name} = ?" for name in SERIES_COLUMN_NAMES)  # SQL: rows of one series


class OfSeries:
    """Something of one series (a run, its outcome, a message about it): the series' parts,
    read through the :class:`Series` it holds."""

    series: Series

    @property
    def lane(self) -> str:
        return self.series.lane

    @property
    def split(self) -> str:
        return self.series.split

    @property
    def runtime(self) -> str:
        return self.series.runtime

    @property
    def case_set(self) -> str:
        return self.series.case_set
