"""Stage tables as Parquet files read and written one case batch at a time.

A run's cases are cut into **batches** of whole cases (about :func:`batch_turns` turns each)
when the cases stage writes them: row group *j* of the cases file holds batch *j*. Every later
stage writes its rows of batch *j* as row group *j* of its own file (an empty batch is an
empty row group), so the stages of a run stream side by side: a stage reads batch *j* of each
input, scores it, writes it, and lets it go. Memory is bounded by a batch, not by the run.

A batch is counted in turns, but a turn's text has no fixed size (10,000 turns of 20 kB
answers are 200 MB of text, several GB once scored). So a writer also cuts each batch it is
given into **parts** of whole cases, a part closed at the first case that brings it to
:func:`batch_bytes` bytes of text: a part is one row group, and the file's metadata says how
many parts each batch has. :meth:`StageFile.batch` still reads a batch whole (the tables of
verdicts, a few bytes a row); :meth:`StageFile.parts` reads it a part at a time, as the stages
that read transcripts do.

Every stage scores a case from that case's rows alone (turn and case predicates), and a
lane's metrics add up over batches (see :func:`eval_pipeline.run.pipeline.merge_batches`), so a
run scored in batches has the tables and metrics of the same run scored in one piece.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eval_pipeline.core import whole_number_env
from eval_pipeline.tables.columns import filled, nullable_types, to_arrow

BATCH_TURNS_ENV = "EVAL_PIPELINE_BATCH_TURNS"
DEFAULT_BATCH_TURNS = 20_000
BATCH_BYTES_ENV = "EVAL_PIPELINE_BATCH_BYTES"
DEFAULT_BATCH_BYTES = 16 * 1024 * 1024
PARTS_KEY = b"eval_pipeline.batch_parts"  # file metadata: the parts (row groups) of each batch, in order


def batch_turns() -> int:
    """Turns per batch: ``EVAL_PIPELINE_BATCH_TURNS``, else 20,000 (a few hundred MB at most)."""
    return whole_number_env(BATCH_TURNS_ENV, "turns") or DEFAULT_BATCH_TURNS


def batch_bytes() -> int:
    """Bytes of text per part of a batch: ``EVAL_PIPELINE_BATCH_BYTES``, else 16 MiB (scored,
    a few hundred MB)."""
    return whole_number_env(BATCH_BYTES_ENV, "bytes") or DEFAULT_BATCH_BYTES


def text_bytes(table: pa.Table) -> np.ndarray:
    """Each row's bytes of text: the lengths of its string values, summed (an int64 array)."""
    sizes = np.zeros(table.num_rows, dtype=np.int64)
    for column in table.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            sizes += pc.fill_null(pc.binary_length(column), 0).to_numpy()
    return sizes


def part_lengths(table: pa.Table, budget: int) -> list[int]:
    """The rows of each part ``table`` is cut into: whole cases (a case's rows are adjacent), a
    part closed at the first case that brings it to ``budget`` bytes of text; one part for a
    table without a ``case_id`` column, or within budget (an empty table too)."""
    if "case_id" not in table.column_names or table.num_rows == 0:
        return [table.num_rows]
    sizes = text_bytes(table)
    if int(sizes.sum()) < budget:  # the whole table within budget: no case closes a part
        return [table.num_rows]
    # The rows that end a case (the last row too), and the bytes held up to each of them.
    cases = pc.dictionary_encode(table["case_id"].combine_chunks(), null_encoding="encode").indices
    codes = cases.to_numpy(zero_copy_only=False)
    ends = np.flatnonzero(np.append(codes[1:] != codes[:-1], True))
    held = np.cumsum(sizes)[ends]
    lengths: list[int] = []
    start, first, before = 0, 0, 0  # the part's first row, its first case end, the bytes before it
    while True:
        # The first case end at which the part holds the budget: the part closes there.
        at = first + int(np.searchsorted(held[first:], before + budget, side="left"))
        if at >= len(ends) - 1:  # none before the last row: the rest is the last part
            break
        end = int(ends[at]) + 1
        lengths.append(end - start)
        start, first, before = end, at + 1, int(held[at])
    lengths.append(table.num_rows - start)
    return lengths


@dataclass(frozen=True)
class StageFile:
    """A stage table in Parquet, one row group per case batch."""

    path: Path

    @property
    def _file(self) -> pq.ParquetFile:
        return pq.ParquetFile(self.path)

    @property
    def batch_count(self) -> int:
        return len(self._parts())

    def _parts(self, file: pq.ParquetFile | None = None) -> list[int]:
        """The row groups of each batch (one each in a file written in one part per batch)."""
        file = file or self._file
        kept = (file.metadata.metadata or {}).get(PARTS_KEY)
        return [int(n) for n in json.loads(kept)] if kept else [1] * file.metadata.num_row_groups

    def _groups(self, index: int, file: pq.ParquetFile) -> range:
        parts = self._parts(file)
        if not 0 <= index < len(parts):
            raise IndexError(f"{self.path.name} has no batch {index} (it has {len(parts)})")
        start = sum(parts[:index])
        return range(start, start + parts[index])

    def part_count(self, index: int) -> int:
        """How many parts batch ``index`` was written in."""
        return len(self._groups(index, self._file))

    def parts(self, index: int, columns: Sequence[str] | None = None) -> Iterator[pd.DataFrame]:
        """Batch ``index`` a part at a time (whole cases each, see the module), as :meth:`batch`
        gives a batch."""
        file = self._file
        for group in self._groups(index, file):
            table = file.read_row_group(group, columns=list(columns) if columns else None)
            yield table.to_pandas(types_mapper=nullable_types)

    @property
    def row_count(self) -> int:
        return int(self._file.metadata.num_rows)

    @property
    def schema(self) -> pa.Schema:
        return self._file.schema_arrow

    def column_max(self, name: str) -> Any:
        """The largest value of a column (None when it holds none), from the row groups'
        statistics where they have them, so a big table is not read for it."""
        file = self._file
        index = file.schema_arrow.get_field_index(name)
        if index < 0:
            return None
        found = None
        for group in range(file.metadata.num_row_groups):
            meta = file.metadata.row_group(group)
            if meta.num_rows == 0:
                continue
            stats = meta.column(index).statistics
            if stats is None or not stats.has_min_max:
                if stats is not None and stats.null_count == meta.num_rows:
                    continue  # only nulls
                value = pc.max(file.read_row_group(group, columns=[name]).column(0)).as_py()
            else:
                value = stats.max
            if value is not None and (found is None or value > found):
                found = value
        return found

    def batches(
        self, columns: Sequence[str] | None = None, where: pc.Expression | None = None
    ) -> Iterator[pd.DataFrame]:
        """The table's batches in order, as DataFrames (nullable dtypes, like every stage table);
        with ``where``, only each batch's rows that match it (a batch may come out empty).
        Without ``where``, a row's index is its place in its batch (see :meth:`batch` to read
        more of those rows later)."""
        file = self._file
        for index in range(self.batch_count):
            group = self._batch_table(file, index, columns)
            if where is not None:
                group = group.filter(where)
            yield group.to_pandas(types_mapper=nullable_types)

    def batch(self, index: int, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Batch ``index`` alone, as :meth:`batches` gives it."""
        return self._batch_table(self._file, index, columns).to_pandas(types_mapper=nullable_types)

    def _batch_table(self, file: pq.ParquetFile, index: int, columns: Sequence[str] | None) -> pa.Table:
        groups = self._groups(index, file)
        if len(groups) == 1:
            return file.read_row_group(groups[0], columns=list(columns) if columns else None)
        return file.read_row_groups(list(groups), columns=list(columns) if columns else None)

    def read(self, columns: Sequence[str] | None = None, where: pc.Expression | None = None) -> pd.DataFrame:
        """The rows that match ``where`` (all rows without it), read a batch at a time; of each
        batch only ``columns`` are read (all without them), so ``where`` names only those."""
        file = self._file
        names = list(columns) if columns else None
        parts: list[pa.Table] = []
        for index in range(file.metadata.num_row_groups):
            group = file.read_row_group(index, columns=names)
            if where is not None:
                group = group.filter(where)
            parts.append(group)
        schema = self.schema if not names else pa.schema([self.schema.field(n) for n in names])
        table = pa.concat_tables(parts) if parts else schema.empty_table()
        return table.to_pandas(types_mapper=nullable_types)

    def note(self, key: str) -> str | None:
        """The note its stage left under ``key`` (:meth:`StageWriter.note`), or None."""
        found = (self._file.metadata.metadata or {}).get(key.encode())
        return None if found is None else found.decode()

    def distinct(self, column: str) -> list[Any]:
        """The column's distinct values but null, in the order they first occur, read a batch at
        a time (a million cases from a few files: a few values, not a million)."""
        file = self._file
        found: dict[Any, None] = {}
        for index in range(file.metadata.num_row_groups):
            values = pc.unique(file.read_row_group(index, columns=[column])[column]).drop_null()
            found.update(dict.fromkeys(values.to_pylist()))
        return list(found)

    def read_cases(self, case_ids: Sequence[str], where: pc.Expression | None = None) -> pd.DataFrame:
        """Every column of the rows of ``case_ids`` that match ``where``: a batch is read whole
        only when its ``case_id`` column holds one of them (a case's rows are all in one batch)."""
        file = self._file
        ids = pa.array(list(case_ids), pa.string())
        wanted = in_cases(case_ids) if where is None else in_cases(case_ids) & where
        parts: list[pa.Table] = []
        for index in range(file.metadata.num_row_groups):
            held = file.read_row_group(index, columns=["case_id"])["case_id"]
            if pc.any(pc.is_in(held, ids)).as_py():
                parts.append(file.read_row_group(index).filter(wanted))
        table = pa.concat_tables(parts) if parts else self.schema.empty_table()
        return table.to_pandas(types_mapper=nullable_types)


def aligned_count(*files: StageFile) -> int:
    """How many case batches the files hold, the same number in each (else ValueError)."""
    counts = {f.batch_count for f in files}
    if len(counts) > 1:
        listed = ", ".join(f"{f.path.name}: {f.batch_count}" for f in files)
        raise ValueError(f"stage files do not hold the same case batches ({listed})")
    return counts.pop() if counts else 0


def aligned_batch(
    files: Sequence[StageFile], index: int, columns: Sequence[Sequence[str] | None] = ()
) -> list[pd.DataFrame]:
    """Batch ``index`` of every file, together: the rows of the same cases in each table (of
    each file, only the ``columns`` given in its place, when given; see :func:`aligned_count`)."""
    chosen = [*columns, *[None] * (len(files) - len(columns))]
    return [f.batch(index, names) for f, names in zip(files, chosen, strict=True)]


class StageWriter:
    """Writes a stage table batch by batch to a temporary file; :meth:`finish` returns it.

    A writer left without ``finish`` (an exception in the stage) removes its file: a failed
    stage leaves nothing half-written."""

    def __init__(self, schema: pa.Schema, folder: str | Path | None = None) -> None:
        self.schema = schema
        self.budget = batch_bytes()
        self._parts: list[int] = []  # row groups written of each batch
        self._pending: list[pa.Table] = []  # rows of the batch being written, not yet in a part
        self._pending_bytes = 0
        self._written = 0  # parts written of the batch being written
        handle, name = tempfile.mkstemp(dir=folder, prefix=".stage.", suffix=".parquet.tmp")
        os.close(handle)
        self.path = Path(name)
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(self.path, schema, compression="zstd")

    def write(self, rows: pd.DataFrame, **constants: Any) -> None:
        """Write one batch (an empty batch too: batches stay aligned); ``constants`` fill whole
        columns (the run columns)."""
        self.write_table(to_arrow(self.schema, rows, **constants))

    def write_table(self, table: pa.Table, **constants: Any) -> None:
        """Write one batch, a table of the stage's schema (but ``constants``, which fill whole
        columns), as a row group per part (see the module: one unless its text is long)."""
        self.add(table, **constants)
        self.end_batch()

    def add(self, rows: pd.DataFrame | pa.Table, **constants: Any) -> int:
        """Rows of whole cases of the batch being written (:meth:`end_batch` ends it): each part
        is written once it holds :func:`batch_bytes` of text, so a batch given a piece at a time
        is never held whole. Returns the most bytes of text a row of them holds."""
        if self._writer is None:
            raise ValueError("the stage file is already finished")
        if isinstance(rows, pd.DataFrame):
            table = to_arrow(self.schema, rows, **constants)
        else:
            table = filled(self.schema, rows, **constants) if constants else rows
        sizes = text_bytes(table)
        self._pending.append(table)
        self._pending_bytes += int(sizes.sum())
        if self._pending_bytes >= self.budget:
            self._write_parts(last=False)
        return int(sizes.max()) if len(sizes) else 0

    def end_batch(self) -> None:
        """Write what is left of the batch being written and end it (an empty batch is an empty
        row group: batches stay aligned)."""
        self._write_parts(last=True)
        self._parts.append(self._written)
        self._written = 0

    def _write_parts(self, *, last: bool) -> None:
        if self._writer is None:
            raise ValueError("the stage file is already finished")
        table = pa.concat_tables(self._pending) if self._pending else self.schema.empty_table()
        lengths = part_lengths(table, self.budget)
        keep = 0 if last else lengths.pop()  # the last part may grow with the next rows
        offset = 0
        for length in lengths:
            if length or not self._written:
                self._writer.write_table(table.slice(offset, length), row_group_size=max(length, 1))
                self._written += 1
            offset += length
        self._pending = [table.slice(offset, keep)] if keep else []
        self._pending_bytes = int(text_bytes(self._pending[0]).sum()) if keep else 0

    def note(self, key: str, text: str) -> None:
        """Keep ``text`` under ``key`` in the file (a fact of the whole stage, not of a row)."""
        if self._writer is None:
            raise ValueError("the stage file is already finished")
        self._writer.add_key_value_metadata({key: text})

    def finish(self) -> StageFile:
        if self._writer is None:
            raise ValueError("the stage file is already finished")
        if any(parts != 1 for parts in self._parts):
            self._writer.add_key_value_metadata({PARTS_KEY: json.dumps(self._parts)})
        self._writer.close()
        self._writer = None
        return StageFile(self.path)

    def discard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> StageWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if kind is not None:
            self.discard()


def failed(column: str = "passed") -> pc.Expression:
    """Rows whose verdict is false (a null verdict, not applicable, is not a failure)."""
    return pc.field(column) == pa.scalar(False)


def faulted() -> pc.Expression:
    """Transcript rows of a turn the runtime failed."""
    return pc.field("error").is_valid()


def in_cases(case_ids: Sequence[str]) -> pc.Expression:
    return pc.field("case_id").isin(pa.array(list(case_ids), pa.string()))


# A table's run-level facts (DataFrame.attrs: the metrics table's judged outcome), kept as the
# Parquet file's key-value metadata and handed back with the table to whoever reads it.
OUTCOME_ATTR = "eval_pipeline.outcome.run_outcome"


def read_table(path: Path) -> pd.DataFrame:
    """A stored stage table, whole, with its run-level facts (:data:`OUTCOME_ATTR`) in ``attrs``."""
    table = pq.read_table(path)
    frame = table.to_pandas(types_mapper=nullable_types)
    kept = (table.schema.metadata or {}).get(OUTCOME_ATTR.encode())
    if kept is not None:
        frame.attrs[OUTCOME_ATTR] = kept.decode()
    return frame
