"""``replay:PATH``: re-score recorded turns without calling a runtime.

PATH is a JSONL or Parquet file of recorded turns, one per row, in the transcripts schema:
``case_id``, ``turn_index``, ``prompt``, ``surface``, ``grounding_source`` and optionally
``surface_tag``, ``epistemic_status``, ``error``. Translation candidates (EvalCase v1 §5:
``case_id``, ``text``, ``raw_response``) are accepted too: ``text`` is the surface, the
turn index defaults to 0 and ``raw_response`` travels in ``raw``.

Replay is strict: a recorded prompt that differs from the case's prompt, or a turn the
file does not hold, is bad input (RuntimeSpecError), not a runtime fault.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, model_validator

from eval_pipeline.cases.loading import CaseFileError, CaseProblem, parse_case_file, validate_record
from eval_pipeline.memo import Recent
from eval_pipeline.runtimes.base import ChatSession, RuntimeSpecError, TurnResponse
from eval_pipeline.runtimes.options import NoOptions, validate_options
from eval_pipeline.runtimes.registry import register_runtime


class RecordedTurn(BaseModel):
    """One recorded turn (or one translation candidate)."""

    model_config = ConfigDict(extra="ignore")

    case_id: str
    turn_index: int = 0
    prompt: str | None = None
    surface: str | None = None
    text: str | None = None
    raw_response: str | None = None
    grounding_source: str | None = None
    surface_tag: str | None = None
    epistemic_status: str | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _has_answer(self) -> RecordedTurn:
        if self.surface is None and self.text is None and self.error is None:
            raise ValueError("a recorded turn needs 'surface' (or a candidate's 'text', or an 'error')")
        return self


class RecordedFault(RuntimeError):
    """A turn that failed when it was recorded; replayed as the same fault."""


class ReplaySession:
    def __init__(self, runtime: ReplayRuntime, case_id: str) -> None:
        self._runtime = runtime
        self._case_id = case_id
        self._next_turn = 0

    def begin_case(self, case_id: str) -> None:
        """The next turns are this case's, from its turn 0 (a warm session plays several cases)."""
        self._case_id = case_id
        self._next_turn = 0

    def send(self, prompt: str) -> TurnResponse:
        turn_index = self._next_turn
        self._next_turn += 1
        recorded = self._runtime.turns.get((self._case_id, turn_index))
        if recorded is None:
            raise RuntimeSpecError(
                f"{self._runtime.path}: no recorded turn {turn_index} for case {self._case_id!r}"
            )
        if recorded.prompt is not None and recorded.prompt != prompt:
            raise RuntimeSpecError(
                f"{self._runtime.path}: case {self._case_id!r} turn {turn_index}: recorded prompt "
                f"{recorded.prompt!r} differs from the case's prompt {prompt!r}"
            )
        if recorded.error is not None:
            raise RecordedFault(recorded.error)
        raw: dict[str, Any] = {}
        if recorded.raw_response is not None:
            raw["raw_response"] = recorded.raw_response
        return TurnResponse(
            surface=recorded.surface if recorded.surface is not None else recorded.text or "",
            grounding_source=recorded.grounding_source,
            surface_tag=recorded.surface_tag,
            epistemic_status=recorded.epistemic_status,
            raw=raw,
        )

    def close(self) -> None:
        pass


class ReplayRuntime:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.turns = _load_once(path)

    @property
    def spec(self) -> str:
        return f"replay:{self.path}"

    def open_session(self, session_id: str) -> ChatSession:
        return ReplaySession(self, session_id)

    def close(self) -> None:
        pass


# Replay files loaded lately, by content: `run` checks the file before the run starts, and the
# run's transcripts stage replays the same file; it is read and validated once.
_LOADED: Recent[dict[tuple[str, int], RecordedTurn]] = Recent(2)


def _load_once(path: Path) -> dict[tuple[str, int], RecordedTurn]:
    if not path.is_file():
        return _load(path)  # says what is wrong with the path
    key = (str(path), hashlib.blake2b(path.read_bytes(), digest_size=16).digest())
    return _LOADED.get(key, lambda: _load(path))


def _load(path: Path) -> dict[tuple[str, int], RecordedTurn]:
    """Every recorded turn of a JSONL or Parquet file; any bad row is bad input naming file:row: field."""
    if not path.is_file():
        raise RuntimeSpecError(
            f"replay file {path} does not exist" + (" (it is a folder)" if path.is_dir() else "")
        )
    if path.suffix == ".parquet":
        located, problems = _parquet_turns(path)
    else:
        loaded, problems = parse_case_file(path, RecordedTurn)
        located = [(item.case, item.line) for item in loaded]
    turns: dict[tuple[str, int], RecordedTurn] = {}
    for record, line in located:
        key = (record.case_id, record.turn_index)
        if key in turns:
            problems.append(
                CaseProblem(str(path), line, "turn_index", f"turn {key[1]} of case {key[0]!r} recorded twice")
            )
        turns[key] = record
    if problems:
        raise RuntimeSpecError(str(CaseFileError(problems)))
    return turns


def _parquet_turns(path: Path) -> tuple[list[tuple[RecordedTurn, int]], list[CaseProblem]]:
    """Rows of a Parquet file (row n is reported as line n), validated like JSONL records."""
    name = str(path)
    try:
        rows = pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError, ValueError) as exc:
        return [], [CaseProblem(name, 0, "(file)", f"not a readable Parquet file: {exc}")]
    if not rows:
        return [], [CaseProblem(name, 0, "(file)", "file holds no rows")]
    located: list[tuple[RecordedTurn, int]] = []
    problems: list[CaseProblem] = []
    for number, row in enumerate(rows, start=1):
        record, row_problems = validate_record(RecordedTurn, row)
        problems += [CaseProblem(name, number, field, message) for field, message in row_problems]
        if record is not None:
            located.append((record, number))
    return located, problems


@register_runtime("replay")
def replay_runtime(argument: str, options: Mapping[str, Any]) -> ReplayRuntime:
    if not argument:
        raise RuntimeSpecError("replay needs a file: replay:PATH (JSONL or Parquet)")
    validate_options("replay", NoOptions, options)
    return ReplayRuntime(Path(argument).expanduser())
