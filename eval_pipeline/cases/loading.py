"""Load JSONL case files into validated pydantic models, reporting every problem at once.

A problem names the file, the line, the field and what was expected, so that a person can
fix a case file without reading code. Nothing downstream runs on a file that has problems.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from eval_pipeline.cases.jsonl import JsonLine, LineRange, iter_jsonl
from eval_pipeline.core import CaseProblem, FileProblemsError

CaseT = TypeVar("CaseT", bound=BaseModel)


class CaseFileError(FileProblemsError):
    """Case files (and the lane and notify files) failed validation."""

    files = "case files"


@dataclass(frozen=True)
class LoadedCase(Generic[CaseT]):
    """A validated case and where it came from."""

    case: CaseT
    file: str
    line: int
    stored: str | None = None  # the case as the JSON it is stored as, when validation made it


def _field_path(loc: Iterable[int | str]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(f".{part}" if parts else str(part))
    return "".join(parts) or "(line)"


def _describe(error: dict[str, object]) -> str:
    """Turn one pydantic error into words: what was wrong and what was expected."""
    message = str(error.get("msg", "invalid"))
    if error.get("type") == "missing":
        return "required field is missing"
    if error.get("type") == "extra_forbidden":
        return "unknown field (not part of the case schema)"
    if "input" in error and "(got " not in message:  # a model's own message may say what it got
        shown = json.dumps(error["input"], ensure_ascii=False, default=str)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return f"{message} (got {shown})"
    return message


def parse_case_file(path: Path, model: type[CaseT]) -> tuple[list[LoadedCase[CaseT]], list[CaseProblem]]:
    """Every valid record of one JSONL file, and every problem of the others (ids unchecked).

    Blank lines are skipped; every bad line yields problems, never an exception. A record is
    accepted only if it also survives the round trip the pipeline makes (the validated case is
    stored as JSON and read back), so what ``validate`` accepts, ``run`` accepts too.
    """
    stream = CaseStream([path], model, id_field=None)
    return list(stream), stream.problems


def validate_record(
    model: type[CaseT], value: dict[str, Any], *, round_trip: bool = True
) -> tuple[CaseT | None, list[tuple[str, str]]]:
    """``value`` validated by ``model`` in strict mode (no text→number/bool coercion), or its
    problems; with ``round_trip`` the case must also read back from the JSON it is stored as."""
    case, _, problems = _validated(model, value, round_trip)
    return case, problems


def _validated(
    model: type[CaseT], value: dict[str, Any], round_trip: bool
) -> tuple[CaseT | None, str | None, list[tuple[str, str]]]:
    """:func:`validate_record`, with the JSON the round trip read back (None without one)."""
    stored = None
    try:
        case = model.model_validate(value, strict=True)
        if round_trip:
            stored = case.model_dump_json()
            model.model_validate_json(stored, strict=True)  # what run reads back
    except ValidationError as exc:
        return None, None, [(_field_path(error["loc"]), _describe(dict(error))) for error in exc.errors()]
    except ValueError as exc:  # a model's own check that raised outside pydantic's wrapping
        return None, None, [("(line)", str(exc))]
    return case, stored, []


class FirstUses:
    """Where each case id of some files was first used, so that a later use is reported as a
    duplicate with where the first one is (one int per id, not a record per case)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self._first: dict[str, int] = {}  # id -> (file's position << 32) | line

    def duplicate(self, case_id: str, position: int, line: int) -> str | None:
        """Why the case at (file ``position``, ``line``) is a duplicate, or None: it is the first."""
        here = (position << 32) | line
        origin = self._first.setdefault(case_id, here)
        if origin == here:
            return None
        return (
            f"duplicate case id {case_id!r} (first used at {self.paths[origin >> 32]}:{origin & 0xFFFFFFFF})"
        )


class CaseStream(Generic[CaseT]):
    """The validated cases of files, one at a time, never all held at once (a million-case file).

    Problems (and duplicate ids, across files) gather in :attr:`problems` as the files are read;
    :meth:`check` raises them all once the stream is spent. What it yields before then is only
    good once ``check`` passes: a caller writes it somewhere it can throw away."""

    def __init__(
        self,
        paths: Sequence[Path],
        model: type[CaseT],
        id_field: str | None = "id",
        *,
        round_trip: bool = True,
        lines: LineRange | None = None,
    ) -> None:
        if lines is not None and len(paths) != 1:
            raise ValueError("a range of lines is read from one file")
        self.paths = list(paths)
        self.model = model
        self.id_field = id_field  # None: ids are not checked (a recording's rows repeat the case)
        self.round_trip = round_trip  # False: records never stored as JSON and read back
        self.lines = lines  # only these lines of the one file (see eval_pipeline.cases.jsonl.line_ranges)
        self.problems: list[CaseProblem] = []

    def __iter__(self) -> Iterator[LoadedCase[CaseT]]:
        uses = FirstUses(self.paths)
        for position, path in enumerate(self.paths):
            name = str(path)
            file_problems: list[CaseProblem] = []
            for item in iter_jsonl(path, self.lines):
                if not isinstance(item, JsonLine):
                    file_problems.append(CaseProblem(name, item.line, item.field, item.message))
                    continue
                case, stored, record_problems = _validated(self.model, item.value, self.round_trip)
                if case is None:
                    file_problems += [CaseProblem(name, item.line, f, m) for f, m in record_problems]
                    continue
                if self.id_field is not None:
                    duplicate = uses.duplicate(str(getattr(case, self.id_field)), position, item.line)
                    if duplicate is not None:
                        file_problems.append(CaseProblem(name, item.line, self.id_field, duplicate))
                        continue
                yield LoadedCase(case, name, item.line, stored)
            self.problems += sorted(file_problems, key=lambda p: p.line)

    def check(self) -> None:
        """Raise :class:`CaseFileError` listing every problem found, if any."""
        if self.problems:
            raise CaseFileError(self.problems)


def load_cases(paths: Sequence[Path], model: type[CaseT]) -> list[LoadedCase[CaseT]]:
    """Load and validate every file; raise :class:`CaseFileError` listing all problems, if any."""
    stream = CaseStream(paths, model)
    cases = list(stream)
    stream.check()
    return cases
