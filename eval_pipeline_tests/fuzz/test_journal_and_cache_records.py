"""Hostile journal records and response-cache entries whose checksums hold: each is either
read as an answer the transcripts table takes whole, or skipped with a warning (its session
sent again); nothing raises. Every mutation carries its verdict (fits the schema or not), so
the readers are checked against it; random byte damage to whole journal files checks that a
damaged journal only ever loses sessions, never yields one that was not written."""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.run.journal import ADDED_COLUMNS, JournalIdentity, open_journal, read_journal
from eval_pipeline.runtimes.cache import ANSWER_FIELDS, REQUEST_FIELDS, ResponseCache, entry_payload
from eval_pipeline.tables.columns import TRANSCRIPTS, frame, lane_columns, to_arrow

IDENTITY = JournalIdentity("lane_a", "dev", "dev", "c" * 64, "reference", "0123456789abcdef", 1, None)
RUN_COLUMNS = {"run_id": "r", "lane": "lane_a", "split": "dev", "runtime": "reference", "case_set": "dev"}
COLUMNS = lane_columns(TRANSCRIPTS)
TEXT = [f.name for f in TRANSCRIPTS if f.name in COLUMNS and str(f.type) == "string"]
INTS = [f.name for f in TRANSCRIPTS if f.name in COLUMNS and str(f.type).startswith("int")]
FLOATS = [f.name for f in TRANSCRIPTS if f.name in COLUMNS and str(f.type) == "double"]
OPTIONAL = [
    c for c in COLUMNS if c not in ("case_id", "turn_index", "role", "prompt", "surface", "sample_index")
]
ODD_TEXT = ["", "é\u2028\u2029\n\r\t", "\x00\x1f", "🌊" * 50, '"}\n{"session": "x"}', "x" * 5_000]
DEEP = 100_000  # brackets: past any JSON reader's recursion


def row(case_id: str, turn: int) -> dict[str, Any]:
    """A transcript row as the driver journals it."""
    return {
        "case_id": case_id,
        "turn_index": turn,
        "role": "turn",
        "prompt": f"What is {case_id}?",
        "surface": f"An answer {turn}.",
        "grounding_source": "pack",
        "surface_tag": None,
        "epistemic_status": None,
        "latency_ms": 12.5,
        "attempts": 1,
        "error": None,
        "raw": '{"id": "x"}',
        "sample_index": 0,
        "seed": 7,
        "prompt_tokens": 12,
        "completion_tokens": 3,
        "cost": 0.001,
        "cached": False,
        "ttft_ms": None,
        "finish_reason": "stop",
    }


Mutation = Callable[[dict[str, Any], random.Random], Any]


def _cell(change: Callable[[str, random.Random], tuple[str, Any]]) -> Mutation:
    """A mutation of one cell of a random row: ``change`` picks the column and its new value."""

    def mutate(record: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        target = rng.choice(record["rows"])
        name, value = change(target, rng)
        target[name] = value
        return record

    return mutate


def _without(record: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A row missing a column it cannot lack (one a journal written before it existed may lack
    reads as null)."""
    del rng.choice(record["rows"])[rng.choice([c for c in COLUMNS if c not in ADDED_COLUMNS])]
    return record


def _deep(record: dict[str, Any], rng: random.Random) -> bytes:
    """A payload no JSON encoder would write: a value nested past any reader's recursion."""
    return json.dumps(record).replace('"An answer 0."', "[" * DEEP + "]" * DEEP, 1).encode()


# name: (mutation, whether the record still fits its schema)
RECORD_MUTATIONS: dict[str, tuple[Mutation, bool]] = {
    "unchanged": (lambda record, rng: record, True),
    "odd_text": (_cell(lambda r, rng: (rng.choice(TEXT), rng.choice(ODD_TEXT))), True),
    "null_optional": (_cell(lambda r, rng: (rng.choice(OPTIONAL), None)), True),
    "int_in_range": (_cell(lambda r, rng: (rng.choice(INTS), rng.randrange(-(2**31), 2**31))), True),
    "float_from_int": (_cell(lambda r, rng: (rng.choice(FLOATS), rng.randrange(0, 10**6))), True),
    "faulted_turn": (_cell(lambda r, rng: r.update(surface=None) or ("error", "TurnFault: HTTP 500")), True),
    "text_to_number": (_cell(lambda r, rng: (rng.choice(TEXT), rng.choice([12345, 1.5, True]))), False),
    "number_to_text": (_cell(lambda r, rng: (rng.choice(INTS + FLOATS), "7")), False),
    "fractional_int": (_cell(lambda r, rng: (rng.choice(INTS), 7.5)), False),
    "huge_int": (_cell(lambda r, rng: (rng.choice(INTS), rng.choice([10**29, -(10**29), 2**63]))), False),
    "int32_overflow": (
        _cell(lambda r, rng: (rng.choice(["turn_index", "attempts", "sample_index"]), 2**31)),
        False,
    ),
    "non_finite": (
        _cell(lambda r, rng: (rng.choice(FLOATS), rng.choice([float("inf"), -float("inf"), float("nan")]))),
        False,
    ),
    "bool_for_int": (_cell(lambda r, rng: (rng.choice(INTS), True)), False),
    "int_for_bool": (_cell(lambda r, rng: ("cached", 1)), False),
    "nested_value": (_cell(lambda r, rng: (rng.choice(COLUMNS), rng.choice([{"a": 1}, [1], []]))), False),
    "answered_without_surface": (_cell(lambda r, rng: ("surface", None)), False),
    "missing_column": (_without, False),
    "unknown_column": (_cell(lambda r, rng: (rng.choice(["extra", "run_id", "Surface"]), 1)), False),
    "rows_not_a_list": (lambda record, rng: record | {"rows": rng.choice([{}, "rows", None, 5])}, False),
    "rows_empty": (
        lambda record, rng: record | {"rows": []},
        True,
    ),  # a session of no turns (the ledger compares turns)
    "row_not_an_object": (
        lambda record, rng: record | {"rows": [rng.choice([[1, 2], "row", 3, None])]},
        False,
    ),
    "session_not_text": (lambda record, rng: record | {"session": rng.choice([5, None, ["a"]])}, False),
    "sample_not_whole": (
        lambda record, rng: record | {"sample_index": rng.choice(["0", True, 0.5, None])},
        False,
    ),
    "deep_nesting": (_deep, False),
}


def _line(payload: bytes) -> bytes:
    return b"%d %08x " % (len(payload), zlib.crc32(payload)) + payload + b"\n"


def test_each_hostile_record_is_an_answer_the_table_takes_or_skipped(tmp_path: Path) -> None:
    rng = random.Random(2026)
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    opened.writer.close()
    expected: dict[int, tuple[str, str, bool]] = {}  # line: (session, mutation, fits)
    lines = [opened.writer.path.read_bytes()]
    for index in range(600):
        kind = rng.choice(sorted(RECORD_MUTATIONS))
        mutate, fits = RECORD_MUTATIONS[kind]
        key = f"case_{index:04d}"
        record = {"session": key, "sample_index": 0, "rows": [row(key, turn) for turn in range(2)]}
        mutated = mutate(record, rng)
        payload = mutated if isinstance(mutated, bytes) else json.dumps(mutated).encode()
        lines.append(_line(payload))
        expected[index + 2] = (key, kind, fits)
    opened.writer.path.write_bytes(b"".join(lines))

    contents = read_journal(opened.writer.path)

    warned = {_warned_line(w) for w in contents.warnings}
    kept = {key for key, _ in contents.sessions}
    wrong = [
        (line, kind)
        for line, (key, kind, fits) in expected.items()
        if fits != (key in kept) or fits == (line in warned)
    ]
    assert wrong == [], wrong[:10]
    assert {kind for _, kind, _ in expected.values()} == set(RECORD_MUTATIONS)
    taken = [r for key in sorted(contents.sessions) for r in contents.sessions[key]]
    table = to_arrow(TRANSCRIPTS, frame(TRANSCRIPTS, taken), **RUN_COLUMNS)  # what the run stores
    assert table.num_rows == len(taken) and len(taken) > len(kept)


def _warned_line(warning: str) -> int:
    """The line number of a ``<path>:<line>: skipped, …`` warning."""
    return int(warning.split(": skipped", 1)[0].rsplit(":", 1)[1])


@pytest.mark.parametrize("seed", range(40))
def test_a_damaged_journal_only_loses_sessions(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    written = {f"case_{i}": [row(f"case_{i}", t) for t in range(3)] for i in range(30)}
    for key, rows in written.items():
        opened.writer.append_session(key, 0, rows)
    opened.writer.close()
    data = bytearray(opened.writer.path.read_bytes())
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(data))
        damage = rng.choice(["flip", "cut", "newline", "garbage", "duplicate", "delete"])
        if damage == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif damage == "cut":
            del data[at:]
        elif damage == "newline":
            data[at:at] = b"\n"
        elif damage == "garbage":
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        elif damage == "duplicate":
            data[at:at] = data[max(0, at - 300) : at]
        else:
            del data[at : at + rng.randint(1, 300)]
        if not data:
            data = bytearray(b"\n")
    opened.writer.path.write_bytes(bytes(data))

    contents = read_journal(opened.writer.path)
    for (key, sample), rows in contents.sessions.items():
        assert sample == 0 and rows == written[key]  # never a session that was not written
    resumed = open_journal(tmp_path, IDENTITY, "run-2", resume=True)  # never raises
    resumed.writer.close()
    assert set(resumed.answered) == (set(contents.sessions) if contents.identity is not None else set())


ANSWER_MUTATIONS: dict[str, tuple[Callable[[dict[str, Any], random.Random], None], bool]] = {
    "unchanged": (lambda turn, rng: None, True),
    "odd_text": (lambda turn, rng: turn.update(surface=rng.choice(ODD_TEXT)), True),
    "null_optional": (
        lambda turn, rng: turn.update({rng.choice(["raw", "prompt_tokens", "surface_tag"]): None}),
        True,
    ),
    "surface_number": (lambda turn, rng: turn.update(surface=rng.choice([12345, 1.5, False])), False),
    "surface_null": (lambda turn, rng: turn.update(surface=None), False),
    "surface_missing": (lambda turn, rng: turn.pop("surface"), False),
    "huge_tokens": (
        lambda turn, rng: turn.update(prompt_tokens=rng.choice([10**29, 2**63, -(2**64)])),
        False,
    ),
    "fractional_tokens": (lambda turn, rng: turn.update(completion_tokens=2.5), False),
    "text_tokens": (lambda turn, rng: turn.update(completion_tokens="3"), False),
    "raw_object": (lambda turn, rng: turn.update(raw={"usage": {}}), False),
    "non_finite_tokens": (lambda turn, rng: turn.update(prompt_tokens=float("nan")), False),
}


def test_each_hostile_cache_entry_answers_whole_or_is_skipped(tmp_path: Path) -> None:
    rng = random.Random(2027)
    folder = tmp_path / "v1"
    folder.mkdir()
    writer = ResponseCache("v1", tmp_path)
    lines, cases = [], []
    for index in range(300):
        kind = rng.choice(sorted(ANSWER_MUTATIONS))
        asked = [(f"c{index}", t, "turn", f"prompt {t}") for t in range(2)]
        request = writer.request(f"c{index}", 0, None, asked)
        document = json.loads(entry_payload(request, [row(f"c{index}", t) for t in range(2)]))
        mutate, fits = ANSWER_MUTATIONS[kind]
        mutate(rng.choice(document["turns"]), rng)
        payload = json.dumps(document, sort_keys=True).encode()
        lines.append(f"{request.key}\t{hashlib.sha256(payload).hexdigest()}\t".encode() + payload + b"\n")
        cases.append((request, kind, fits))
    (folder / "hostile.log").write_bytes(b"".join(lines))

    cache = ResponseCache("v1", tmp_path)
    wrong = []
    answered = []
    for request, kind, fits in cases:
        answers = cache.answers(request)
        if (answers is not None) != fits:
            wrong.append(kind)
        if answers is None:
            continue
        for asked, answer in zip(request.turns, answers, strict=True):
            answered.append(
                {**row(asked[0], asked[1]), **dict(zip(REQUEST_FIELDS, asked, strict=True)), **answer}
            )
    cache.close()
    assert wrong == [], wrong[:10]
    assert cache.counts.skipped == sum(not fits for _, _, fits in cases)
    assert {kind for _, kind, _ in cases} == set(ANSWER_MUTATIONS)
    assert all(set(answer) <= set(COLUMNS) for answer in answered) and set(ANSWER_FIELDS) <= set(COLUMNS)
    assert to_arrow(TRANSCRIPTS, frame(TRANSCRIPTS, answered), **RUN_COLUMNS).num_rows == len(answered)
