"""Turn predicates a column at a time: the scalar function stays the reference.

A turn predicate may declare a *vectorised form* (``@vectorised(name)``): given the columns
of many answered turns it returns the verdict of each, as columns. Most forms are a
*screen*: an Arrow compute kernel marks the turns that certainly pass with a fixed code and
evidence (the ones with no placeholder marker, no ``;``, no ``-grounded`` …), and only the
others go through the scalar function. A test checks that both forms agree, turn for turn,
on every fixture surface, the seed examples and generated text.

Faulted turns never reach a vectorised form: the caller gives them ``turn_error`` as the
scalar guard does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa

from eval_pipeline.core import Registry
from eval_pipeline.predicates.base import PREDICATES, TurnView, Verdict
from eval_pipeline.predicates.rows import evidence_json

Flags = np.ndarray[Any, np.dtype[np.bool_]]  # one per turn
Numbers = np.ndarray[Any, np.dtype[np.int64]]


def flags(column: pa.Array) -> Flags:
    """A boolean Arrow column without nulls as a NumPy array."""
    found: Flags = np.asarray(column.to_numpy(zero_copy_only=False), dtype=bool)
    return found


def numbers(column: pa.Array) -> Numbers:
    """An integer Arrow column without nulls as a NumPy array of int64."""
    found: Numbers = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
    return found


@dataclass(frozen=True)
class TurnColumns:
    """The columns of answered turns a turn predicate reads (one entry per turn)."""

    surface: Sequence[str]
    grounding_source: Sequence[str | None]
    surface_tag: Sequence[str | None]
    arrow_surface: pa.Array | None = field(default=None, repr=False, compare=False)  # when at hand

    def __len__(self) -> int:
        return len(self.surface)

    def view(self, index: int) -> TurnView:
        return TurnView(self.surface[index], self.grounding_source[index], self.surface_tag[index])

    @cached_property
    def surfaces(self) -> pa.Array:
        """The surfaces as one Arrow array (``arrow_surface``, else built once; shared by every form)."""
        if self.arrow_surface is not None:
            return self.arrow_surface
        return pa.array(self.surface, type=pa.string())


@dataclass(frozen=True)
class VerdictColumns:
    """One verdict per turn, as the predicate tables store it (evidence as canonical JSON)."""

    passed: list[bool | None]
    code: list[str]
    evidence: list[str]


VectorisedForm = Callable[[TurnColumns], VerdictColumns]
VECTORISED: Registry[VectorisedForm] = Registry("vectorised predicate", "eval_pipeline.predicates")


def vectorised(name: str) -> Callable[[VectorisedForm], VectorisedForm]:
    """Register the vectorised form of the turn predicate ``name`` (its scalar form is the reference)."""
    return VECTORISED.register(name)


def scalar_columns(name: str, turns: TurnColumns) -> VerdictColumns:
    """The reference: the scalar predicate on every turn, one at a time."""
    function = PREDICATES.get(name).function
    verdicts: list[Verdict] = [function(turns.view(i)) for i in range(len(turns))]
    return VerdictColumns(
        [v.passed for v in verdicts],
        [v.code for v in verdicts],
        [evidence_json(v.evidence) for v in verdicts],
    )


def verdict_columns(name: str, turns: TurnColumns) -> VerdictColumns:
    """The predicate's verdicts over ``turns``: its vectorised form when it declares one."""
    if name in VECTORISED:
        return VECTORISED.get(name)(turns)
    return scalar_columns(name, turns)


def screened(name: str, turns: TurnColumns, certain: Flags, verdict: Verdict) -> VerdictColumns:
    """``verdict`` where ``certain`` holds, the scalar predicate everywhere else."""
    function = PREDICATES.get(name).function
    size = len(certain)
    passed: list[bool | None] = [verdict.passed] * size
    code: list[str] = [verdict.code] * size
    evidence: list[str] = [evidence_json(verdict.evidence)] * size
    for index in np.flatnonzero(~certain).tolist():
        found = function(turns.view(index))
        passed[index], code[index], evidence[index] = found.passed, found.code, evidence_json(found.evidence)
    return VerdictColumns(passed, code, evidence)


def once_per_key(name: str, turns: TurnColumns, keys: Iterable[Hashable]) -> VerdictColumns:
    """The scalar predicate on the first turn of each distinct key, its verdict repeated for the
    other turns with that key: for keys that determine the verdict (the answers of a batch
    share a few; a turn whose verdict quotes it gets a key of its own)."""
    function = PREDICATES.get(name).function
    index: dict[Hashable, int] = {}  # each distinct key, numbered in order of first appearance
    of_turn = np.fromiter((index.setdefault(key, len(index)) for key in keys), dtype=np.int64)
    if not len(of_turn):
        return VerdictColumns([], [], [])
    first = np.unique(of_turn, return_index=True)[1]  # the first turn of each key, by number
    verdicts = [function(turns.view(turn)) for turn in first.tolist()]
    return VerdictColumns(
        _spread([v.passed for v in verdicts], of_turn),
        _spread([v.code for v in verdicts], of_turn),
        _spread([evidence_json(v.evidence) for v in verdicts], of_turn),
    )


def _spread(values: Sequence[Any], at: Numbers) -> list[Any]:
    """``values[at[i]]`` for every i, as a plain list."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    spread: list[Any] = array[at].tolist()
    return spread
