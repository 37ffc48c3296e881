"""Load JSONL case files into validated pydantic models, reporting every problem at once.

A problem names the file, the line, the field and what was expected, so that a person can
fix a case file without reading code. Nothing downstream runs on a file that has problems.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from eval_pipeline.cases.jsonl import read_jsonl
from eval_pipeline.memo import Recent

CaseT = TypeVar("CaseT", bound=BaseModel)


@dataclass(frozen=True)
class CaseProblem:
    """One thing wrong with one line of a case file."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class CaseFileError(ValueError):
    """Case files failed validation; ``problems`` lists every problem found."""

    def __init__(self, problems: Sequence[CaseProblem]) -> None:
        self.problems = list(problems)
        shown = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in case files:\n{shown}")


@dataclass(frozen=True)
class LoadedCase(Generic[CaseT]):
    """A validated case and where it came from."""

    case: CaseT
    file: str
    line: int


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
    if "input" in error and error.get("type") != "missing":
        shown = json.dumps(error["input"], ensure_ascii=False, default=str)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return f"{message} (got {shown})"
    return message


def parse_case_file(path: Path, model: type[CaseT]) -> tuple[list[LoadedCase[CaseT]], list[CaseProblem]]:
    """Parse one JSONL file with the strict reader, then validate each record strictly.

    Blank lines are skipped; every bad line yields problems, never an exception. A record is
    accepted only if it also survives the round trip the pipeline makes (the validated case is
    stored as JSON and read back), so what ``validate`` accepts, ``run`` accepts too.
    """
    name = str(path)
    try:
        key = (name, model, hashlib.blake2b(path.read_bytes(), digest_size=16).digest())
    except OSError:
        key = None  # read_jsonl says what is wrong with the path
    if key is None:
        return _parse_case_file(path, model)
    cases, problems = _PARSED.get(key, lambda: _parse_case_file(path, model))
    return list(cases), list(problems)


# Files parsed lately, by content: `run` validates every file before it starts, then its stages
# read the same files; they are parsed once.
_PARSED: Recent[tuple[list[Any], list[CaseProblem]]] = Recent(4)


def _parse_case_file(path: Path, model: type[CaseT]) -> tuple[list[LoadedCase[CaseT]], list[CaseProblem]]:
    name = str(path)
    records, line_problems = read_jsonl(path)
    problems = [CaseProblem(name, p.line, p.field, p.message) for p in line_problems]
    cases: list[LoadedCase[CaseT]] = []
    for record in records:
        case, record_problems = validate_record(model, record.value)
        problems += [CaseProblem(name, record.line, field, message) for field, message in record_problems]
        if case is not None:
            cases.append(LoadedCase(case, name, record.line))
    return cases, sorted(problems, key=lambda p: p.line)


def validate_record(model: type[CaseT], value: dict[str, Any]) -> tuple[CaseT | None, list[tuple[str, str]]]:
    """``value`` validated by ``model`` in strict mode (no text→number/bool coercion), or its problems."""
    try:
        case = model.model_validate(value, strict=True)
        model.model_validate_json(case.model_dump_json(), strict=True)  # what run reads back
    except ValidationError as exc:
        return None, [(_field_path(error["loc"]), _describe(dict(error))) for error in exc.errors()]
    except ValueError as exc:  # a model's own check that raised outside pydantic's wrapping
        return None, [("(line)", str(exc))]
    return case, []


def duplicate_id_problems(cases: Sequence[LoadedCase[CaseT]], id_field: str = "id") -> list[CaseProblem]:
    """A problem for every case whose id was already used (by an earlier line, in any file)."""
    first_seen: dict[str, LoadedCase[CaseT]] = {}
    problems: list[CaseProblem] = []
    for loaded in cases:
        case_id = str(getattr(loaded.case, id_field))
        if case_id in first_seen:
            origin = first_seen[case_id]
            problems.append(
                CaseProblem(
                    loaded.file,
                    loaded.line,
                    id_field,
                    f"duplicate case id {case_id!r} (first used at {origin.file}:{origin.line})",
                )
            )
        else:
            first_seen[case_id] = loaded
    return problems


def load_cases(paths: Sequence[Path], model: type[CaseT]) -> list[LoadedCase[CaseT]]:
    """Load and validate every file; raise :class:`CaseFileError` listing all problems, if any."""
    cases: list[LoadedCase[CaseT]] = []
    problems: list[CaseProblem] = []
    for path in paths:
        file_cases, file_problems = parse_case_file(path, model)
        cases.extend(file_cases)
        problems.extend(file_problems)
    problems.extend(duplicate_id_problems(cases))
    if problems:
        raise CaseFileError(problems)
    return cases
