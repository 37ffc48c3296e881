"""Stage tables as Parquet files read and written one case batch at a time.

A run's cases are cut into **batches** of whole cases (about :func:`batch_turns` turns each)
when the cases stage writes them: row group *j* of the cases file holds batch *j*. Every later
stage writes its rows of batch *j* as row group *j* of its own file (an empty batch is an
empty row group), so the stages of a run stream side by side: a stage reads batch *j* of each
input, scores it, writes it, and lets it go. Memory is bounded by a batch, not by the run.

Every stage scores a case from that case's rows alone (turn and case predicates), and a
lane's metrics add up over batches (see :func:`eval_pipeline.run.pipeline.merge_batches`), so a
run scored in batches has the tables and metrics of the same run scored in one piece.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eval_pipeline.core import whole_number_env
from eval_pipeline.tables.columns import filled, nullable_types, to_arrow

BATCH_TURNS_ENV = "EVAL_PIPELINE_BATCH_TURNS"
DEFAULT_BATCH_TURNS = 20_000


def batch_turns() -> int:
    """Turns per batch: ``EVAL_PIPELINE_BATCH_TURNS``, else 20,000 (a few hundred MB at most)."""
    return whole_number_env(BATCH_TURNS_ENV, "turns") or DEFAULT_BATCH_TURNS


@dataclass(frozen=True)
class StageFile:
    """A stage table in Parquet, one row group per case batch."""

    path: Path

    @property
    def _file(self) -> pq.ParquetFile:
        return pq.ParquetFile(self.path)

    @property
    def batch_count(self) -> int:
        return int(self._file.metadata.num_row_groups)

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
        for index in range(file.metadata.num_row_groups):
            group = file.read_row_group(index, columns=list(columns) if columns else None)
            if where is not None:
                group = group.filter(where)
            yield group.to_pandas(types_mapper=nullable_types)

    def batch(self, index: int, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Batch ``index`` alone, as :meth:`batches` gives it."""
        group = self._file.read_row_group(index, columns=list(columns) if columns else None)
        return group.to_pandas(types_mapper=nullable_types)

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
        handle, name = tempfile.mkstemp(dir=folder, prefix=".stage.", suffix=".parquet.tmp")
        os.close(handle)
        self.path = Path(name)
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(self.path, schema, compression="zstd")

    def write(self, rows: pd.DataFrame, **constants: Any) -> None:
        """Write one batch as one row group (an empty batch too: batches stay aligned);
        ``constants`` fill whole columns (the run columns)."""
        self.write_table(to_arrow(self.schema, rows, **constants))

    def write_table(self, table: pa.Table, **constants: Any) -> None:
        """Write one batch, a table of the stage's schema (but ``constants``, which fill whole
        columns), as one row group."""
        if constants:
            table = filled(self.schema, table, **constants)
        if self._writer is None:
            raise ValueError("the stage file is already finished")
        self._writer.write_table(table, row_group_size=max(len(table), 1))

    def note(self, key: str, text: str) -> None:
        """Keep ``text`` under ``key`` in the file (a fact of the whole stage, not of a row)."""
        if self._writer is None:
            raise ValueError("the stage file is already finished")
        self._writer.add_key_value_metadata({key: text})

    def finish(self) -> StageFile:
        if self._writer is None:
            raise ValueError("the stage file is already finished")
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
