"""Checks a mutated case file against its known verdicts, through what ``validate`` and ``run`` do.

``validate`` is :func:`eval_pipeline.cli.checked_files.validate_files`. ``run`` is its loading path
without Dagster: :func:`eval_pipeline.run.pipeline.load_split` with the file as ``--cases``, then
what the cases and transcripts assets do before any runtime is called (the cases table as
Parquet, the cases read back from it, the lane's threads). Any other exception is a traceback.
"""

from __future__ import annotations

import io
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eval_pipeline.cases import CaseFileError, CaseProblem
from eval_pipeline.cli.checked_files import validate_files
from eval_pipeline.lanes import LaneSpec, lane_kind
from eval_pipeline.run.cases_stage import cases_frame
from eval_pipeline.run.pipeline import cases_from_frame, lane_threads, load_split
from eval_pipeline_tests.fuzz.mutations import Mutated, base_cases, case_model, mutated_file, write_corpus

SPLIT = "fuzz"


@dataclass
class FuzzCounts:
    """What a fuzz round found. Every field but the line counts must be 0."""

    lines: int = 0
    valid_lines: int = 0
    tracebacks: int = 0
    invalid_accepted: int = 0
    valid_rejected: int = 0
    wrong_line_numbers: int = 0
    disagreements: int = 0
    examples: list[str] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)

    def failures(self) -> int:
        return (
            self.tracebacks
            + self.invalid_accepted
            + self.valid_rejected
            + self.wrong_line_numbers
            + self.disagreements
        )

    def note(self, text: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(text)

    def add(self, other: FuzzCounts) -> None:
        for name in COUNT_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.kinds.update(other.kinds)
        for example in other.examples:
            self.note(example)


def run_loading_path(spec: LaneSpec, path: Path) -> list[CaseProblem]:
    """What ``run --cases PATH`` does before calling a runtime; its problems, or [] when it would run."""
    try:
        loaded = load_split(spec, SPLIT, path)
    except CaseFileError as exc:
        return exc.problems
    table = cases_frame(loaded, SPLIT)
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), io.BytesIO())
    kind = lane_kind(spec)
    models = cases_from_frame(kind, table)
    lane_threads(spec, SPLIT, models)
    return []


def check_file(spec: LaneSpec, path: Path, expected: dict[int, Mutated]) -> FuzzCounts:
    """Compare validate and run on ``path`` with the verdict of each line."""
    counts = FuzzCounts(lines=len(expected), valid_lines=sum(m.valid for m in expected.values()))
    counts.kinds.update(m.kind for m in expected.values())
    model = case_model(spec)
    try:
        loaded, problems = validate_files([path], model)
        run_problems = run_loading_path(spec, path)
    except Exception as exc:
        counts.tracebacks += 1
        counts.note(f"{path}: {type(exc).__name__}: {exc}"[:300])
        return counts
    accepted = {item.line for item in loaded}
    reported = {p.line for p in problems}
    for number, mutated in expected.items():
        if mutated.valid and number not in accepted:
            counts.valid_rejected += 1
            shown = [str(p) for p in problems if p.line == number]
            counts.note(f"valid {mutated.kind} rejected: {shown} {mutated.raw[:160]!r}")
        if not mutated.valid and (number in accepted or number not in reported):
            counts.invalid_accepted += 1
            counts.note(f"invalid {mutated.kind} accepted at line {number}: {mutated.raw[:160]!r}")
    stray = sorted(line for line in reported if line not in expected or expected[line].valid)
    counts.wrong_line_numbers += len(stray)
    for line in stray[:3]:
        counts.note(
            f"problem at line {line}, which is not an invalid line: {[str(p) for p in problems if p.line == line]}"
        )
    if sorted(map(str, run_problems)) != sorted(map(str, problems)):
        counts.disagreements += 1
        counts.note(f"{path}: validate and run report different problems")
    counts.disagreements += _accepted_lines_run(spec, path, accepted, counts)
    return counts


def _accepted_lines_run(spec: LaneSpec, path: Path, accepted: set[int], counts: FuzzCounts) -> int:
    """The lines validate accepted, alone in a file: validate passes it, so run must take it."""
    if not accepted:
        return 0
    lines = path.read_bytes().split(b"\n")
    subset = path.with_name(path.stem + ".accepted.jsonl")
    subset.write_bytes(b"\n".join(lines[n - 1] for n in sorted(accepted)) + b"\n")
    try:
        problems = run_loading_path(spec, subset)
    except Exception as exc:
        counts.tracebacks += 1
        counts.note(f"run on accepted lines of {path}: {type(exc).__name__}: {exc}"[:300])
        return 0
    if problems:
        counts.note(f"run rejects lines validate accepted: {[str(p) for p in problems[:3]]}")
    return len(problems)


def fuzz_lane(spec: LaneSpec, folder: Path, *, lines: int, seed: int, per_file: int = 250) -> FuzzCounts:
    """``lines`` mutated lines of one lane in files of ``per_file`` lines, checked one file at a time."""
    rng = random.Random(seed)
    bases = base_cases(spec)
    model = case_model(spec)
    total = FuzzCounts()
    for index in range(0, lines, per_file):
        mutated = mutated_file(bases, model, spec.name, rng, min(per_file, lines - index))
        path = folder / f"{spec.name}_{index:06d}.jsonl"
        total.add(check_file(spec, path, write_corpus(path, mutated, rng)))
    return total


COUNT_FIELDS: tuple[str, ...] = (
    "lines",
    "valid_lines",
    "tracebacks",
    "invalid_accepted",
    "valid_rejected",
    "wrong_line_numbers",
    "disagreements",
)
"""The counted fields of :class:`FuzzCounts`, in report order."""
