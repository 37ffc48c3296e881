"""``replay:PATH``: re-score recorded turns without calling a runtime.

PATH is a JSONL or Parquet file of recorded turns, one per row, in the transcripts schema:
``case_id``, ``turn_index``, ``prompt``, ``surface``, ``grounding_source`` and optionally
``surface_tag``, ``epistemic_status``, ``error``. Translation candidates (EvalCase v1 §5:
``case_id``, ``text``, ``raw_response``) are accepted too: ``text`` is the surface, the
turn index defaults to 0 and ``raw_response`` travels in ``raw``.

A recording answers every turn of a run at once (:meth:`ReplayRuntime.answers`, one
join of the turns to send with the turns recorded): no session is opened and nothing is timed,
so a million recorded turns replay in about a second. Replay is strict: a recorded prompt
that differs from the case's prompt, or a turn the file does not hold, is bad input
(RuntimeSpecError), not a runtime fault.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from eval_pipeline.cases import CaseFileError, CaseProblem, CaseStream, validate_record
from eval_pipeline.cases.flat_jsonl import read_flat_jsonl
from eval_pipeline.core import collector_paused
from eval_pipeline.runtimes.base import (
    ChatSession,
    CommittedRun,
    RecordedRuntime,
    RuntimeSpecError,
    TurnResponse,
)
from eval_pipeline.runtimes.options import NoOptions, validate_options
from eval_pipeline.runtimes.registry import register_runtime
from eval_pipeline.tables import TRANSCRIPTS

# What a recorded turn's ``raw`` may say about the turn itself: the pipeline reads these back
# out of it (a transcript's ``raw`` never holds them; a hand-written recording may).
_TURN_KEYS_IN_RAW = ("attempts", "seed")


def said(raw: str) -> dict[str, Any]:
    """What a recorded ``raw`` says: the JSON text of an object whose ``attempts`` and ``seed``,
    if it holds them, are whole numbers (ValueError otherwise)."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ValueError("expected the JSON text of an object (what a transcript's raw holds)")
    for key in _TURN_KEYS_IN_RAW:
        if key in value and (not isinstance(value[key], int) or isinstance(value[key], bool)):
            raise ValueError(f"its {key!r} must be a whole number (got {value[key]!r})")
    return value


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

    @field_validator("raw")
    @classmethod
    def _raw_is_an_object(cls, raw: str | None) -> str | None:
        if raw:  # an empty raw says nothing
            said(raw)
        return raw

    @model_validator(mode="after")
    def _has_answer(self) -> RecordedTurn:
        if self.surface is None and self.text is None and self.error is None:
            raise ValueError("a recorded turn needs 'surface' (or a candidate's 'text', or an 'error')")
        return self


# The recorded turn's fields as Arrow columns (whole numbers as int64, the rest text), which of
# them a turn must give, and the defaults of those it may leave out that are not null.
RECORDED_FIELDS = pa.schema(
    [
        (name, pa.int64() if int in (field.annotation, *get_args(field.annotation)) else pa.string())
        for name, field in RecordedTurn.model_fields.items()
    ]
)
_REQUIRED = [name for name, field in RecordedTurn.model_fields.items() if field.is_required()]
_DEFAULTS = {
    name: field.default
    for name, field in RecordedTurn.model_fields.items()
    if not field.is_required() and field.default is not None
}
KEY = ["case_id", "sample_index", "turn_index"]
# A recording's answers, as a transcript row holds them (see recording_table).
ANSWERS = [
    "surface",
    "grounding_source",
    "surface_tag",
    "epistemic_status",
    "attempts",
    "error",
    "raw",
    "seed",
]


class RecordedFault(RuntimeError):
    """A turn that failed when it was recorded; replayed as the same fault."""


def recording_table(turns: pa.Table) -> pa.Table:
    """Recorded turns (columns of :data:`RECORDED_FIELDS`, validated) as a transcript holds their
    answers, by :data:`KEY`, plus each recorded prompt (``recorded_prompt``).

    A recorded fault is ``error`` "RecordedFault: <what was recorded>" with no answer (the
    seed of its sample is the run's). An answer's surface is its ``surface``, else a
    candidate's ``text``; its ``raw`` is the recorded ``raw`` with the candidate's
    ``raw_response`` and the recorded seed merged in, then the turn's own ``attempts`` and
    ``seed`` read back out of it, as a live turn's would be."""
    faulted = pc.is_valid(turns["error"])
    answered = pc.invert(faulted)

    def answer(column: pa.ChunkedArray) -> pa.ChunkedArray:
        return pc.if_else(faulted, pa.nulls(len(column), column.type), column)

    surface = pc.coalesce(turns["surface"], turns["text"], pa.scalar(""))
    attempts, raw, seed = _raw_and_turn_keys(turns, answered)
    return pa.table(
        {
            "case_id": turns["case_id"],
            "sample_index": turns["sample_index"],
            "turn_index": turns["turn_index"],
            "recorded_prompt": turns["prompt"],
            "surface": answer(surface),
            "grounding_source": answer(turns["grounding_source"]),
            "surface_tag": answer(turns["surface_tag"]),
            "epistemic_status": answer(turns["epistemic_status"]),
            "attempts": attempts,
            "error": pc.binary_join_element_wise(pa.scalar("RecordedFault: "), turns["error"], ""),
            "raw": raw,
            "seed": seed,
        }
    )


def _raw_and_turn_keys(turns: pa.Table, answered: pa.ChunkedArray) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Each answered turn's attempts, raw JSON text and seed (a fault: 1, null, null). Only a
    turn that recorded a ``raw`` or a ``raw_response`` is looked at in Python; a ``raw`` that
    is not what :func:`said` reads raises ValueError."""
    seeds = pc.if_else(answered, turns["seed"], pa.nulls(turns.num_rows, pa.int64())).to_pylist()
    attempts = [1] * turns.num_rows
    raws: list[str | None] = [None] * turns.num_rows
    carries = pc.and_(answered, pc.or_(pc.is_valid(turns["raw"]), pc.is_valid(turns["raw_response"])))
    rows = pc.indices_nonzero(carries)
    if len(rows):
        picked = turns.select(["raw", "raw_response"]).take(rows).to_pylist()
        for row, recorded in zip(rows.to_pylist(), picked, strict=True):
            merged = said(recorded["raw"]) if recorded["raw"] else {}
            if recorded["raw_response"] is not None:
                merged["raw_response"] = recorded["raw_response"]
            if seeds[row] is not None:
                merged["seed"] = seeds[row]
            attempts[row] = int(merged.pop("attempts", 1))
            seed = merged.pop("seed", None)
            seeds[row] = int(seed) if seed is not None else None
            raws[row] = (
                json.dumps(merged, sort_keys=True, ensure_ascii=False, default=str) if merged else None
            )
    return pa.array(attempts, pa.int64()), pa.array(raws, pa.string()), pa.array(seeds, pa.int64())


class ReplaySession:
    """One case's recorded turns, in order, through the session protocol (a caller that sends
    turn by turn; :func:`eval_pipeline.run.drive.drive` asks :meth:`ReplayRuntime.answers`)."""

    def __init__(self, runtime: ReplayRuntime, case_id: str) -> None:
        self._runtime = runtime
        self._case_id = case_id
        self._next_turn = 0

    def send(self, prompt: str) -> TurnResponse:
        request = pa.table(
            {
                "case_id": [self._case_id],
                "sample_index": pa.array([0], pa.int64()),
                "turn_index": pa.array([self._next_turn], pa.int64()),
                "prompt": [prompt],
            }
        )
        self._next_turn += 1
        answer = self._runtime.answers(request).to_pylist()[0]
        if answer["error"] is not None:
            raise RecordedFault(answer["error"].removeprefix("RecordedFault: "))
        raw = json.loads(answer["raw"]) if answer["raw"] else {}
        if answer["seed"] is not None:
            raw["seed"] = answer["seed"]
        if answer["attempts"] != 1:
            raw["attempts"] = answer["attempts"]
        return TurnResponse(
            surface=answer["surface"],
            grounding_source=answer["grounding_source"],
            surface_tag=answer["surface_tag"],
            epistemic_status=answer["epistemic_status"],
            raw=raw,
        )

    def close(self) -> None:
        pass


class ReplayRuntime(RecordedRuntime):
    """Recorded turns (a :func:`recording_table`) from ``source`` (named in messages); the
    recording of a committed run says which (``committed_run``)."""

    def __init__(
        self, source: str, recording: pa.Table, *, spec: str, committed_run: CommittedRun | None = None
    ) -> None:
        self._source = source
        self.spec = spec
        self.recording = recording
        self.committed_run = committed_run
        self._found = recording.append_column("found", pa.repeat(True, recording.num_rows))

    @property
    def source(self) -> str:
        return self._source

    @property
    def recorded_cases(self) -> frozenset[str]:
        return frozenset(pc.unique(self.recording["case_id"]).to_pylist())

    @property
    def samples_per_case(self) -> int:
        """How many samples per case the recording holds: a replay plays every one of them."""
        most = pc.max(self.recording["sample_index"]).as_py()
        return 1 + (most or 0)

    def open_session(self, session_id: str, seed: int | None = None) -> ChatSession:
        return ReplaySession(self, session_id)

    def answers(self, requests: pa.Table) -> pa.Table:
        """The recorded answer (columns :data:`ANSWERS`) to each turn of ``requests`` (columns
        ``case_id``, ``sample_index``, ``turn_index``, ``prompt``), row for row.

        Raises RuntimeSpecError for the first turn, in ``requests`` order, that the file does
        not hold or that it recorded with another prompt."""
        position = pa.array(np.arange(requests.num_rows, dtype=np.int64))
        asked = requests.select([*KEY, "prompt"]).append_column("position", position)
        # The hash table is built on the right side: the turns asked (a batch), not the recording.
        joined = self._found.join(asked, keys=KEY, join_type="right outer").sort_by("position")
        # A recorded prompt (when the file holds one) must be the prompt sent; null compares as no.
        differs = pc.fill_null(pc.not_equal(joined["recorded_prompt"], joined["prompt"]), False)
        bad = pc.or_(pc.is_null(joined["found"]), differs)
        if pc.any(bad).as_py():
            first = joined.filter(bad).slice(0, 1).to_pylist()[0]
            raise RuntimeSpecError(self._refusal(first))
        return joined.select(ANSWERS)

    def _refusal(self, turn: dict[str, Any]) -> str:
        case, index = turn["case_id"], turn["turn_index"]
        if turn["found"] is None:
            sample = f" sample {turn['sample_index']}" if turn["sample_index"] else ""
            return f"{self.source}: no recorded turn {index} for case {case!r}{sample}"
        return (
            f"{self.source}: case {case!r} turn {index}: recorded prompt "
            f"{turn['recorded_prompt']!r} differs from the case's prompt {turn['prompt']!r}"
        )

    def close(self) -> None:
        pass


_ROWS_AT_ONCE = 50_000  # rows turned into a table at a time: a million dicts at once would be a gigabyte


def recorded_turns(
    name: str, located: Iterable[tuple[RecordedTurn, int]], problems: list[CaseProblem]
) -> pa.Table:
    """Validated recorded turns as a :func:`recording_table`; a turn recorded twice, or any
    problem, is bad input.

    ``problems`` is read once ``located`` is spent (a stream adds to it as it goes)."""
    first_line: dict[tuple[str, int, int], int] = {}
    tables: list[pa.Table] = []
    rows: list[dict[str, Any]] = []
    for record, line in located:
        key = (record.case_id, record.sample_index, record.turn_index)
        if first_line.setdefault(key, line) != line:
            sample = f" sample {key[1]}" if key[1] else ""
            problems.append(
                CaseProblem(
                    name, line, "turn_index", f"turn {key[2]} of case {key[0]!r}{sample} recorded twice"
                )
            )
        rows.append(record.model_dump())
        if len(rows) == _ROWS_AT_ONCE:
            tables.append(pa.Table.from_pylist(rows, schema=RECORDED_FIELDS))
            rows = []
    if problems:
        raise RuntimeSpecError(str(CaseFileError(problems)))
    tables.append(pa.Table.from_pylist(rows, schema=RECORDED_FIELDS))
    return recording_table(pa.concat_tables(tables))


def flat_recording(path: Path) -> pa.Table | None:
    """The recording of a JSONL file Arrow can read as the strict reader would (see
    :mod:`eval_pipeline.cases.flat_jsonl`) and that holds no problem, else None: the strict
    reader reads it, and says what is wrong."""
    turns = read_flat_jsonl(path, _FLAT_FIELDS, required=_REQUIRED, defaults=_DEFAULTS)
    return _recording_if_sound(turns.select(RECORDED_FIELDS.names)) if turns is not None else None


def typed_recording(table: pa.Table) -> pa.Table | None:
    """The recording of a table (a Parquet file's, a history query's) whose columns hold what a
    recorded turn's fields take (text as text, whole numbers as integers, no null where the field
    takes none) and that holds no problem, else None: its rows are validated one by one, and
    each problem reported at its row."""
    columns: dict[str, pa.ChunkedArray | pa.Array] = {}
    for field in RECORDED_FIELDS:
        if field.name not in table.column_names:
            if field.name in _REQUIRED:
                return None
            absent = pa.scalar(_DEFAULTS.get(field.name), field.type)
            columns[field.name] = pa.repeat(absent, table.num_rows)
            continue
        column = table[field.name]
        texts = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        fits = texts if pa.types.is_string(field.type) else pa.types.is_integer(column.type)
        if not (fits or pa.types.is_null(column.type)):
            return None
        if column.null_count and (field.name in _REQUIRED or field.name in _DEFAULTS):
            return None
        try:
            columns[field.name] = column.cast(field.type)
        except pa.ArrowInvalid:  # a whole number too big for the column
            return None
    return _recording_if_sound(pa.table(columns, schema=RECORDED_FIELDS))


def _recording_if_sound(turns: pa.Table) -> pa.Table | None:
    """The :func:`recording_table` of typed recorded turns, or None when one of them has no
    answer, is recorded twice or carries a ``raw`` that :func:`said` refuses."""
    answered = pc.or_(
        pc.or_(pc.is_valid(turns["surface"]), pc.is_valid(turns["text"])), pc.is_valid(turns["error"])
    )
    if not pc.all(answered).as_py():
        return None
    if turns.group_by(KEY).aggregate([]).num_rows != turns.num_rows:  # a turn recorded twice
        return None
    try:
        return recording_table(turns)
    except ValueError:  # a raw that is not an object's JSON text
        return None


# The columns a flat recording may hold: the recorded turn's, and a transcript's others (a
# transcript written out as JSONL is a recording; what replay does not read, it ignores).
_FLAT_FIELDS = pa.schema(
    [
        *RECORDED_FIELDS,
        *(field for field in TRANSCRIPTS if field.name not in RECORDED_FIELDS.names),
    ]
)


def _load(path: Path) -> pa.Table:
    """Every recorded turn of a JSONL or Parquet file; any bad row is bad input naming file:row: field."""
    if not path.is_file():
        raise RuntimeSpecError(
            f"replay file {path} does not exist" + (" (it is a folder)" if path.is_dir() else "")
        )
    # A million recorded turns are a million live objects, none of them garbage: the cyclic
    # collector would walk them all again and again while they are read (about a tenth of the load).
    with collector_paused():
        if path.suffix == ".parquet":
            return _parquet_recording(path)
        flat = flat_recording(path)
        return flat if flat is not None else strict_recording(path)


def strict_recording(path: Path) -> pa.Table:
    """The recording of a JSONL file read by the strict reader, line by line (every problem
    is reported at its line)."""
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


def _parquet_recording(path: Path) -> pa.Table:
    """The recording of a Parquet file: its columns as they are when they hold what recorded
    turns take (:func:`typed_recording`), else its rows validated like JSONL records (row n is
    reported as line n)."""
    name = str(path)
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        return recorded_turns(
            name, [], [CaseProblem(name, 0, "(file)", f"not a readable Parquet file: {exc}")]
        )
    if not table.num_rows:
        return recorded_turns(name, [], [CaseProblem(name, 0, "(file)", "file holds no rows")])
    typed = typed_recording(table)
    if typed is not None:
        return typed
    return recorded_turns(name, *rows_to_turns(name, table.to_pylist()))


@register_runtime("replay", NoOptions)
def replay_runtime(argument: str, options: Mapping[str, Any]) -> ReplayRuntime:
    if not argument:
        raise RuntimeSpecError("replay needs a file: replay:PATH (JSONL or Parquet)")
    validate_options("replay", NoOptions, options)
    path = Path(argument).expanduser()
    return ReplayRuntime(str(path), _load(path), spec=f"replay:{path}")
