"""Stage 1, the cases: a split's case files validated and written as the cases table.

A big file (:data:`PARALLEL_MIN_LINES` lines or more) is cut into line ranges validated side
by side by the worker processes (:mod:`eval_pipeline.run.workers`), each writing its ranges' cases
to a file of its own. This process takes those files
in file order, checks ids across ranges and files, cuts the batches the way one process
would, and writes the stage file: the table, and every problem, are the same either way. The
workers are then stopped: what validating left in their memory is not carried into the
stages that score (which start fresh ones when they have enough work).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import pandas as pd
import pyarrow as pa

from eval_pipeline.cases import (
    CaseFileError,
    CaseProblem,
    CaseStream,
    FirstUses,
    LineRange,
    LoadedCase,
    line_ranges,
)
from eval_pipeline.cases.batch import remember_models
from eval_pipeline.core import each_without_collector
from eval_pipeline.lanes import LaneKind, LaneSpec, lane_kind
from eval_pipeline.run.workers import close_workers, in_order, worker_count
from eval_pipeline.tables import CASES, StageFile, StageWriter, batch_turns

# Cases whose turns are counted together while the cases stage cuts its batches.
THREAD_CHUNK = 1_000
# A file this long is validated in line ranges side by side; a shorter one in this process,
# since starting the workers would cost more than they save (benchmarks/cases_stage.py).
PARALLEL_MIN_LINES = 100_000
# Bytes per line range: several ranges per worker, so this process merges the ranges that are
# done while the workers validate the rest, and little is left to merge after the last one.
RANGE_BYTES = 16 << 20


def case_paths(spec: LaneSpec, split: str, cases_path: str | Path | None = None) -> list[Path]:
    """The files a split evaluates: the lane's own, or one given file judged by the lane's contract."""
    return [Path(cases_path)] if cases_path else spec.case_files(split)


def cases_frame(
    loaded: Sequence[LoadedCase[Any]], split: str, turns: Sequence[int] | None = None
) -> pd.DataFrame:
    """Cases as a table: one row per case, the validated case as canonical JSON, and how many
    turns its thread sends (``turns``, one per case, when known)."""
    columns = _case_columns(loaded, split, turns, remember=True)
    return pd.DataFrame({**columns, "turns": pd.array(columns["turns"], dtype="Int64")}, columns=CASES.names)


def _case_table(
    loaded: Sequence[LoadedCase[Any]], split: str, turns: Sequence[int], *, remember: bool
) -> pa.Table:
    """:func:`cases_frame` as the Arrow table the cases stage writes (no DataFrame between)."""
    return pa.table(_case_columns(loaded, split, turns, remember=remember), schema=CASES)


def _case_columns(
    loaded: Sequence[LoadedCase[Any]], split: str, turns: Sequence[int] | None, *, remember: bool
) -> dict[str, list[Any]]:
    """The columns of the cases table; ``remember``: the stages of this process will read these
    cases back, so they get these models (a worker's cases are read by another process)."""
    texts = [item.stored if item.stored is not None else item.case.model_dump_json() for item in loaded]
    if loaded and remember:
        remember_models(texts, [item.case for item in loaded])
    return {
        "case_id": [str(item.case.id) for item in loaded],
        "split": [split] * len(loaded),
        "file": [item.file for item in loaded],
        "line": [item.line for item in loaded],
        "case_json": texts,
        "turns": list(turns) if turns is not None else [None] * len(loaded),
    }


def write_cases(
    spec: LaneSpec, split: str, cases_path: str | Path | None = None, folder: str | Path | None = None
) -> StageFile:
    """Stage 1: the split's validated cases, in batches of about :func:`batch_turns` turns.

    Every case is validated and the turns its threads send counted (so a prompt that cannot be
    composed fails here, before anything is sent); every problem of every file is raised at once
    (:class:`eval_pipeline.cases.CaseFileError`) and no file is left behind."""
    paths = case_paths(spec, split, cases_path)
    budget, workers = batch_turns(), worker_count()
    ranges = [_ranges_of(path, workers) for path in paths]
    with StageWriter(CASES, folder) as writer:
        if any(ranges):
            problems = _write_from_workers(writer, spec, split, paths, ranges, workers, budget)
        else:
            kind = lane_kind(spec)
            stream = CaseStream(paths, kind.case_model)
            # The collector runs between batches, not within one (see eval_pipeline.core.collector).
            for loaded, turns in each_without_collector(_case_batches(kind, stream, spec, split, budget)):
                writer.write_table(_case_table(loaded, split, turns, remember=True))
            problems = stream.problems
        if problems:
            raise CaseFileError(problems)
        return writer.finish()


def _ranges_of(path: Path, workers: int) -> list[LineRange]:
    """The line ranges a file is validated in side by side; [] to read it whole."""
    try:
        size = path.stat().st_size
    except OSError:
        return []  # reading it says what is wrong with the path
    return line_ranges(path, max(workers, -(-size // RANGE_BYTES)), PARALLEL_MIN_LINES) if workers > 1 else []


def _case_batches(
    kind: LaneKind, stream: Iterable[LoadedCase[Any]], spec: LaneSpec, split: str, budget: int
) -> Iterator[tuple[list[LoadedCase[Any]], list[int]]]:
    """The cases of ``stream`` in batches (see :func:`_batches`), with how many turns each sends."""
    chunks = _chunks(stream, THREAD_CHUNK)
    sent = ((chunk, kind.turns_per_case([item.case for item in chunk], spec, split)) for chunk in chunks)
    for parts, turns in _batches(sent, budget):
        yield [case for part in parts for case in part], turns


class _Sliceable(Protocol):
    def __getitem__(self, index: slice, /) -> Self: ...


RowsT = TypeVar("RowsT", bound=_Sliceable)


def _batches(
    pieces: Iterable[tuple[RowsT, Sequence[int]]], budget: int
) -> Iterator[tuple[list[RowsT], list[int]]]:
    """Consecutive rows of cases (a list of cases, a table), each with how many turns each case
    sends, cut into batches of whole cases: a batch closes at the first case that brings it to
    ``budget`` turns. Each batch is its pieces of rows and its cases' turns; there is at least
    one batch, empty for no cases. The one rule, however the rows come."""
    parts: list[RowsT] = []
    turns: list[int] = []
    pending = 0
    written = False
    for rows, sent in pieces:
        start = 0
        for index, count in enumerate(sent, start=1):
            pending += count
            if pending >= budget:
                parts.append(rows[start:index])
                turns += sent[start:index]
                yield parts, turns
                parts, turns, pending, written, start = [], [], 0, True, index
        if start < len(sent):
            parts.append(rows[start:])
            turns += sent[start:]
    if parts or not written:
        yield parts, turns


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


# --- a big file, validated side by side -----------------------------------------------------


def _write_from_workers(
    writer: StageWriter,
    spec: LaneSpec,
    split: str,
    paths: Sequence[Path],
    ranges: Sequence[list[LineRange]],
    workers: int,
    budget: int,
) -> list[CaseProblem]:
    """Write the cases of ``paths`` validated by worker processes, a range (or a small file) each;
    their problems, and duplicate ids across all of them, in the order one process reports them."""
    found: list[list[CaseProblem]] = [[] for _ in paths]
    with tempfile.TemporaryDirectory(prefix=".cases.", dir=writer.path.parent) as scratch:
        tasks = [
            (position, partial(_write_range, spec, split, path, part, scratch, budget))
            for position, path in enumerate(paths)
            for part in ranges[position] or (None,)
        ]
        # Closed before the scratch folder goes: on an error too, no worker is left writing there.
        with closing(in_order([task for _, task in tasks], workers)) as written:
            done = zip([position for position, _ in tasks], written, strict=True)
            pieces = _checked_pieces(done, FirstUses(paths), found)
            for tables, _ in each_without_collector(_batches(pieces, budget)):
                writer.write_table(pa.concat_tables(tables) if tables else CASES.empty_table())
    close_workers()
    return [problem for problems in found for problem in sorted(problems, key=lambda p: p.line)]


def _write_range(
    spec: LaneSpec, split: str, path: Path, lines: LineRange | None, folder: str, budget: int
) -> tuple[Path, list[CaseProblem]]:
    """In a worker: the valid cases of ``lines`` of ``path`` (all of it for None), ids unchecked,
    written to an Arrow file in ``folder`` (read once, at once, so not Parquet); and the range's
    problems."""
    kind = lane_kind(spec)
    stream = CaseStream([path], kind.case_model, id_field=None, lines=lines)
    handle, name = tempfile.mkstemp(dir=folder, suffix=".arrow")
    os.close(handle)
    with pa.ipc.new_file(name, CASES) as out:
        for loaded, turns in each_without_collector(_case_batches(kind, stream, spec, split, budget)):
            out.write_table(_case_table(loaded, split, turns, remember=False))
    return Path(name), stream.problems


def _checked_pieces(
    written: Iterable[tuple[int, tuple[Path, list[CaseProblem]]]],
    uses: FirstUses,
    found: list[list[CaseProblem]],
) -> Iterator[tuple[pa.Table, list[int]]]:
    """The rows the workers wrote, a range at a time in file order (with the position of its
    file), without the later uses of an id (each a problem in ``found``, as :class:`CaseStream`
    reports it), with each case's turns."""
    for position, (part, problems) in written:
        found[position] += problems
        with pa.OSFile(str(part)) as source:
            table = pa.ipc.open_file(source).read_all()
        part.unlink()
        keep = [True] * table.num_rows
        for row, (case_id, line) in enumerate(
            zip(table.column("case_id").to_pylist(), table.column("line").to_pylist(), strict=True)
        ):
            duplicate = uses.duplicate(case_id, position, line)
            if duplicate is not None:
                found[position].append(CaseProblem(str(uses.paths[position]), line, "id", duplicate))
                keep[row] = False
        if not all(keep):
            table = table.filter(pa.array(keep))
        yield table, table.column("turns").to_pylist()
