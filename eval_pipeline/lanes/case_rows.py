"""The columns a declared lane's case rows are built from, one block of rows at a time.

A case predicates table is assembled from blocks (a lifted turn predicate, a case rule), each
built for every case it applies to at once as Arrow columns: stored verdicts are found by
(case position, predicate) with one vectorised pass over the turn predicates table, listed
fields are read as their few distinct lists, and the blocks are merged by one sort on (case
position, slot). Python runs per distinct value, and per row only where a row quotes its own
evidence (a failure's message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.cases.batch import DistinctLists, distinct_lists

Positions = np.ndarray[Any, np.dtype[np.int64]]
Flags = np.ndarray[Any, np.dtype[np.bool_]]

TEXT = pa.large_string()
# Every case-row column is text but ``passed`` (true, false, or null: not applicable).
_TYPES: Mapping[str, pa.DataType] = {"passed": pa.bool_()}


def arrow_column(table: pd.DataFrame, name: str, type_: pa.DataType) -> pa.Array:
    """A table's column as one Arrow array of ``type_`` (an Arrow-backed column is not copied)."""
    values = pa.array(table[name], from_pandas=True)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values if values.type == type_ else values.cast(type_)


def repeated(value: str, size: int) -> pa.Array:
    """``value`` ``size`` times, as a text column."""
    return pa.repeat(pa.scalar(value, TEXT), size)


def chosen(values: Sequence[Any], at: np.ndarray[Any, Any], type_: pa.DataType = TEXT) -> pa.Array:
    """The column of ``values[at[i]]``: a few distinct values spread over many rows."""
    return pa.array(list(values), type_).take(pa.array(np.asarray(at, dtype=np.int64)))


class CaseRowBlocks:
    """Rows of a case predicates table gathered block by block, each row keyed by its case's
    position and its slot within the case; :meth:`frame` puts them in (position, slot) order."""

    def __init__(self, case_ids: Sequence[str]) -> None:
        self._case_ids = pa.array(list(case_ids), TEXT)
        self._next_slot = 0
        self._positions: list[Positions] = []
        self._slots: list[Positions] = []
        self._blocks: list[dict[str, pa.Array]] = []

    def take_slot(self) -> int:
        """The slot of the next block: blocks come out of a case in the order they were taken."""
        self._next_slot += 1
        return self._next_slot - 1

    def extend(
        self, positions: Positions, slot: int, columns: Mapping[str, pa.Array | Sequence[Any]]
    ) -> None:
        """One row per case at ``positions``: its ``case_id``, and ``columns`` (every other column
        of the table, as Arrow arrays or lists of plain values)."""
        block = {"case_id": self._case_ids.take(pa.array(positions, pa.int64()))}
        for name, values in columns.items():
            type_ = _TYPES.get(name, TEXT)
            block[name] = values if isinstance(values, pa.Array) else pa.array(list(values), type_)
        self._positions.append(positions)
        self._slots.append(np.full(len(positions), slot, dtype=np.int64))
        self._blocks.append(block)

    def frame(self, names: Sequence[str]) -> pd.DataFrame:
        """The rows in (case position, slot) order, as a DataFrame of plain columns (text and
        a ``passed`` column of booleans, with None where a verdict does not apply)."""
        if not any(len(p) for p in self._positions):
            return pd.DataFrame({name: [] for name in names}, columns=list(names))
        order = pa.array(np.lexsort((np.concatenate(self._slots), np.concatenate(self._positions))))
        return pd.DataFrame(
            {
                name: pa.concat_arrays([block[name] for block in self._blocks]).take(order).to_pandas()
                for name in names
            },
            columns=list(names),
        )


class StoredVerdicts:
    """The stored verdict of each (case, turn predicate): the case's last row of the predicate
    in the turn predicates table (its last scored turn's), found for all cases in one pass."""

    def __init__(self, case_ids: Sequence[str], names: Sequence[str], turn_predicates: pd.DataFrame) -> None:
        ids = pa.array(list(case_ids), TEXT)
        self._names = list(dict.fromkeys(names))
        # Cases sharing an id share its rows: each case is keyed by its id's first position.
        self._key_of_case = _indexes(ids, ids)
        case_at = _indexes(arrow_column(turn_predicates, "case_id", TEXT), ids)
        name_at = _indexes(arrow_column(turn_predicates, "predicate", TEXT), pa.array(self._names, TEXT))
        rows = np.flatnonzero((case_at >= 0) & (name_at >= 0))
        keys = case_at[rows] * len(self._names) + name_at[rows]
        self._row_of_key = np.full(len(ids) * len(self._names), -1, dtype=np.int64)
        np.maximum.at(self._row_of_key, keys, rows)  # the last row of each key
        self.passed = arrow_column(turn_predicates, "passed", pa.bool_())
        self.code = arrow_column(turn_predicates, "code", TEXT)
        self.evidence = arrow_column(turn_predicates, "evidence", TEXT)

    def rows(self, name: str, positions: Positions) -> Positions:
        """The stored row of predicate ``name`` of each case at ``positions`` (-1: none)."""
        keys = self._key_of_case[positions] * len(self._names) + self._names.index(name)
        found: Positions = self._row_of_key[keys]
        return found


def _indexes(values: pa.Array, of: pa.Array) -> Positions:
    """The first position of each of ``values`` in ``of`` (-1 where it is not there)."""
    found = pc.index_in(values, value_set=of)
    return np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


class ListedFields:
    """List fields of every case (e.g. its expected predicates), each as the field's distinct
    lists (cases share a few) and which one each case holds; read from the cases together,
    once, when one is first asked for."""

    def __init__(self, cases: Sequence[Any], fields: Sequence[str]) -> None:
        self._cases = cases
        self._names = list(fields)
        self._fields: dict[str, DistinctLists] | None = None

    def lists(self, field: str) -> DistinctLists:
        """The distinct lists of ``field`` (one of the fields named) and the index of each
        case's list among them."""
        if self._fields is None:
            self._fields = distinct_lists(self._cases, self._names)
        return self._fields[field]

    def listing(self, field: str, name: str) -> Flags:
        """Whether each case lists ``name`` in ``field``."""
        lists, of_case = self.lists(field)
        listing: Flags = np.array([name in listed for listed in lists], dtype=bool)[of_case]
        return listing


class Lifted:
    """Which cases a lifting rule gave a case row of each turn predicate, and whether it failed."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._covered: dict[str, Flags] = {}
        self._failed: dict[str, Flags] = {}

    def record(self, name: str, positions: Positions, failed: Flags) -> None:
        self._covered.setdefault(name, np.zeros(self._size, dtype=bool))[positions] = True
        self._failed.setdefault(name, np.zeros(self._size, dtype=bool))[positions] = failed

    def covered(self, name: str) -> Flags:
        return self._covered.get(name, np.zeros(self._size, dtype=bool))

    def failed(self, name: str) -> Flags:
        return self._failed.get(name, np.zeros(self._size, dtype=bool))


def groups(of_row: Positions) -> list[tuple[int, Positions]]:
    """Each distinct value of ``of_row`` with the rows holding it (in row order)."""
    if not len(of_row):
        return []
    order = np.argsort(of_row, kind="stable")
    values, starts = np.unique(of_row[order], return_index=True)
    return [(int(value), rows) for value, rows in zip(values, np.split(order, starts[1:]), strict=True)]
