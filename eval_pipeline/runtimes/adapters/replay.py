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

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, model_validator

from eval_pipeline.cases.loading import CaseFileError, CaseProblem, CaseStream, validate_record
from eval_pipeline.collector import collector_paused
from eval_pipeline.memo import Recent, file_digest
from eval_pipeline.runtimes.base import ChatSession, RuntimeSpecError, TurnResponse
from eval_pipeline.runtimes.options import NoOptions, validate_options
from eval_pipeline.runtimes.registry import register_runtime


class RecordedTurn(BaseModel):
    """One recorded turn (or one translation candidate)."""

    model_config = ConfigDict(extra="ignore")

    case_id: str
    turn_index: int = 0
    sample_index: int = 0
    seed: int | None = None
    raw: str | None = None  # JSON text of what else the runtime said, as transcripts keep it
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


class Recording(NamedTuple):
    """What a replay keeps of a recorded turn: the answer, compactly (a million of them)."""

    prompt: str | None
    surface: str | None
    text: str | None
    raw_response: str | None
    grounding_source: str | None
    surface_tag: str | None
    epistemic_status: str | None
    error: str | None
    raw: str | None
    seed: int | None

    @classmethod
    def of(cls, turn: RecordedTurn) -> Recording:
        # Tags repeat on every turn: one string object each, not one per turn.
        return cls(
            turn.prompt,
            turn.surface,
            turn.text,
            turn.raw_response,
            _shared(turn.grounding_source),
            _shared(turn.surface_tag),
            _shared(turn.epistemic_status),
            turn.error,
            turn.raw,
            turn.seed,
        )


def _shared(tag: str | None) -> str | None:
    return sys.intern(tag) if tag is not None and len(tag) <= 64 else tag


class RecordedFault(RuntimeError):
    """A turn that failed when it was recorded; replayed as the same fault."""


class ReplaySession:
    def __init__(self, runtime: ReplayRuntime, case_id: str) -> None:
        self._runtime = runtime
        self._case_id = case_id
        self._sample_index = 0
        self._next_turn = 0

    def begin_case(self, case_id: str, sample_index: int = 0) -> None:
        """The next turns are this case's (this sample's), from its turn 0 (a warm session plays several cases)."""
        self._case_id = case_id
        self._sample_index = sample_index
        self._next_turn = 0

    def send(self, prompt: str) -> TurnResponse:
        turn_index = self._next_turn
        self._next_turn += 1
        recorded = self._runtime.turns.get((self._case_id, self._sample_index, turn_index))
        if recorded is None:
            sample = f" sample {self._sample_index}" if self._sample_index else ""
            raise RuntimeSpecError(
                f"{self._runtime.path}: no recorded turn {turn_index} for case {self._case_id!r}{sample}"
            )
        if recorded.prompt is not None and recorded.prompt != prompt:
            raise RuntimeSpecError(
                f"{self._runtime.path}: case {self._case_id!r} turn {turn_index}: recorded prompt "
                f"{recorded.prompt!r} differs from the case's prompt {prompt!r}"
            )
        if recorded.error is not None:
            raise RecordedFault(recorded.error)
        raw: dict[str, Any] = json.loads(recorded.raw) if recorded.raw else {}
        if recorded.raw_response is not None:
            raw["raw_response"] = recorded.raw_response
        if recorded.seed is not None:
            raw["seed"] = recorded.seed
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
    """Recorded turns by (case, sample, turn). ``path`` names where they came from in messages."""

    def __init__(
        self, path: Path | str, turns: dict[tuple[str, int, int], Recording], spec: str = ""
    ) -> None:
        self.path = path
        self.turns = turns
        self._spec = spec or f"replay:{path}"

    @property
    def spec(self) -> str:
        return self._spec

    @property
    def recorded_samples(self) -> int:
        """How many samples per case the recording holds: a replay plays every one of them."""
        return 1 + max((sample for _, sample, _ in self.turns), default=0)

    def open_session(self, session_id: str) -> ChatSession:
        return ReplaySession(self, session_id)

    def close(self) -> None:
        pass


def recorded_turns(
    name: str, located: Iterable[tuple[RecordedTurn, int]], problems: list[CaseProblem]
) -> dict[tuple[str, int, int], Recording]:
    """Recorded turns by (case, sample, turn); a turn recorded twice, or any problem, is bad input.

    ``problems`` is read once ``located`` is spent (a stream adds to it as it goes)."""
    turns: dict[tuple[str, int, int], Recording] = {}
    for record, line in located:
        key = (record.case_id, record.sample_index, record.turn_index)
        if key in turns:
            sample = f" sample {key[1]}" if key[1] else ""
            problems.append(
                CaseProblem(
                    name, line, "turn_index", f"turn {key[2]} of case {key[0]!r}{sample} recorded twice"
                )
            )
        turns[key] = Recording.of(record)
    if problems:
        raise RuntimeSpecError(str(CaseFileError(problems)))
    return turns


# Replay files loaded lately, by content: `run` checks the file before the run starts, and the
# run's transcripts stage replays the same file; it is read and validated once.
_LOADED: Recent[dict[tuple[str, int, int], Recording]] = Recent(2)


def _load_once(path: Path) -> dict[tuple[str, int, int], Recording]:
    if not path.is_file():
        return _load(path)  # says what is wrong with the path
    key = (str(path), file_digest(path))
    return _LOADED.get(key, lambda: _load(path))


def _load(path: Path) -> dict[tuple[str, int, int], Recording]:
    """Every recorded turn of a JSONL or Parquet file; any bad row is bad input naming file:row: field."""
    if not path.is_file():
        raise RuntimeSpecError(
            f"replay file {path} does not exist" + (" (it is a folder)" if path.is_dir() else "")
        )
    # A million recorded turns are a million live objects, none of them garbage: the cyclic
    # collector would walk them all again and again while they are read (about a tenth of the load).
    with collector_paused():
        if path.suffix == ".parquet":
            located, problems = _parquet_turns(path)
            return recorded_turns(str(path), located, problems)
        # A recording is never stored as JSON and read back: no round trip to check.
        stream = CaseStream([path], RecordedTurn, id_field=None, round_trip=False)
        return recorded_turns(str(path), ((item.case, item.line) for item in stream), stream.problems)


def rows_to_turns(
    name: str, rows: list[dict[str, Any]]
) -> tuple[list[tuple[RecordedTurn, int]], list[CaseProblem]]:
    """Table rows (row n is reported as line n), validated like JSONL records."""
    located: list[tuple[RecordedTurn, int]] = []
    problems: list[CaseProblem] = []
    for number, row in enumerate(rows, start=1):
        record, row_problems = validate_record(RecordedTurn, row)
        problems += [CaseProblem(name, number, field, message) for field, message in row_problems]
        if record is not None:
            located.append((record, number))
    return located, problems


def _parquet_turns(path: Path) -> tuple[list[tuple[RecordedTurn, int]], list[CaseProblem]]:
    """Rows of a Parquet file (row n is reported as line n), validated like JSONL records."""
    name = str(path)
    try:
        rows = pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError, ValueError) as exc:
        return [], [CaseProblem(name, 0, "(file)", f"not a readable Parquet file: {exc}")]
    if not rows:
        return [], [CaseProblem(name, 0, "(file)", "file holds no rows")]
    return rows_to_turns(name, rows)


@register_runtime("replay")
def replay_runtime(argument: str, options: Mapping[str, Any]) -> ReplayRuntime:
    if not argument:
        raise RuntimeSpecError("replay needs a file: replay:PATH (JSONL or Parquet)")
    validate_options("replay", NoOptions, options)
    path = Path(argument).expanduser()
    return ReplayRuntime(path, _load_once(path))
