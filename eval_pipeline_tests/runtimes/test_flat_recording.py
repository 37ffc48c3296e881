"""A replay file read by Arrow (the flat reader) holds exactly what the strict reader reads: on
every file the flat reader either declines (None) or returns the strict reader's recording, and
a file the strict reader refuses is never accepted."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from eval_pipeline.runtimes.adapters.replay import (
    RECORDED_FIELDS,
    RecordedTurn,
    flat_recording,
    recorded_turns,
    rows_to_turns,
    strict_recording,
    typed_recording,
)
from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline_tests.fuzz import mutations

# The mutations of the case-file fuzzer that make sense for any record (not the case models' ids
# or free-text fields), each breaking a line in one known way or keeping it valid.
GENERIC = (
    mutations.wrong_type,
    mutations.non_finite,
    mutations.lone_surrogate,
    mutations.bad_utf8,
    mutations.deep_nesting,
    mutations.truncated,
    mutations.not_an_object,
    mutations.trailing_garbage,
    mutations.control_character,
    mutations.single_quotes,
    mutations.huge_integer,
    mutations.missing_field,
    mutations.utf16_line,
    mutations.equal_text,
    mutations.crlf,
)


def turn(i: int) -> dict[str, Any]:
    record: dict[str, Any] = {
        "case_id": f"case_{i}",
        "turn_index": i % 3,
        "prompt": f"What is {i}?",
        "surface": f"{i} is a number — née “{i}”.",
        "grounding_source": "pack",
    }
    if i % 4 == 1:
        record["raw"] = json.dumps({"usage": {"tokens": i}, "attempts": 2})
    if i % 5 == 2:
        record["seed"] = i
    if i % 9 == 4:
        record["raw"] = ""  # says nothing
    if i % 7 == 3:
        record = {"case_id": f"case_{i}", "error": "TimeoutError: no answer"}
    return record


def read_both(path: Path) -> tuple[pa.Table | None, pa.Table | None]:
    """(flat reader's table or None, strict reader's table or None when it refuses the file)."""
    try:
        strict = strict_recording(path)
    except RuntimeSpecError:
        strict = None
    return flat_recording(path), strict


def assert_agree(path: Path) -> pa.Table | None:
    flat, strict = read_both(path)
    if flat is not None:
        assert strict is not None, (
            f"the flat reader accepted what the strict one refuses: {path.read_bytes()!r}"
        )
        assert flat.equals(strict), (flat.to_pylist(), strict.to_pylist())
    return flat


def test_a_clean_file_is_read_flat_and_equals_the_strict_reading(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(turn(i)) + "\n" for i in range(40)), encoding="utf-8")
    flat = assert_agree(path)
    assert flat is not None and flat.num_rows == 40


def test_escapes_that_cannot_spell_a_key_leave_a_file_to_the_flat_reader(tmp_path: Path) -> None:
    """A dash or an accented letter escaped (``ensure_ascii``) on lines that leave out the
    defaulted keys: no line needs parsing to tell a missing key from a null."""
    path = tmp_path / "turns.jsonl"
    turns = [{"case_id": f"c{i}", "surface": f"caf\u00e9 \u2014 {i}"} for i in range(30)]
    path.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
    assert "\\u2014" in path.read_text()
    flat = assert_agree(path)
    assert flat is not None and flat.column("turn_index").to_pylist() == [0] * 30


@pytest.mark.parametrize("seed", range(100))
def test_mutated_files_are_read_flat_only_as_the_strict_reader_reads_them(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    lines: list[bytes] = []
    for i in range(6):
        record = turn(seed * 10 + i)
        if rng.random() < 0.4:
            mutation = rng.choice(GENERIC)
            raw, _ = mutation(record, rng, RecordedTurn, "replay")
            lines.append(raw.encode("utf-8") if isinstance(raw, str) else raw)
        else:
            lines.append(json.dumps(record, ensure_ascii=rng.random() < 0.5).encode())
        if rng.random() < 0.1:
            lines.append(rng.choice([b"", b" ", b"\t", b"\r"]))
    path = tmp_path / "turns.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert_agree(path)


@pytest.mark.parametrize(
    "line",
    [
        '{"case_id": "a", "turn_index": null, "surface": "x"}',  # a null is not a missing key
        '{"case_id": "a", "turn_\\u0069ndex": null, "surface": "x"}',  # nor when escaped
        '{"case_id": "a", "turn_i\\u006Edex": null, "surface": "x \\u2014 y"}',  # in capitals too
        '{"case_id": "a", "surface": "x", "latency_ms": NaN}',  # NaN: not JSON
        '{"case_id": "a", "surface": "x", "raw": "[1, 2]"}',  # raw is an object's JSON text
        '{"case_id": "a", "surface": "x", "raw": "{\\"attempts\\": \\"2\\"}"}',
        '{"case_id": "a", "surface": "x", "surface": "y"}',  # a key twice
        '{"case_id": "a", "surface": "x"} {"case_id": "b", "surface": "y"}',  # two on a line
        '{"case_id": "a"}',  # no answer
        '{"case_id": "a", "surface": "x", "note": "not a column"}',  # unknown: read the strict way
        '{"case_id": "a", "surface": "x", "meta": {"deep": [1]}}',
    ],
)
def test_lines_the_flat_reader_must_not_read_on_its_own(line: str, tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text(json.dumps(turn(0)) + "\n" + line + "\n", encoding="utf-8")
    flat, strict = read_both(path)
    assert flat is None
    if strict is not None:  # the strict reader's own verdict stands: an unknown key is ignored
        assert strict.num_rows == 2


def test_a_turn_recorded_twice_is_left_to_the_strict_reader_which_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text(json.dumps(turn(0)) + "\n\n" + json.dumps(turn(0)) + "\n", encoding="utf-8")
    assert flat_recording(path) is None
    with pytest.raises(
        RuntimeSpecError, match=r"turns.jsonl:3: turn_index: turn 0 of case 'case_0' recorded twice"
    ):
        strict_recording(path)


def test_a_transcript_written_as_jsonl_is_read_flat(tmp_path: Path) -> None:
    rows = [
        {
            "run_id": "r1",
            "lane": "l",
            "split": "dev",
            "runtime": "reference",
            "case_set": "dev",
            **turn(i),
            "role": "turn",
            "latency_ms": 1.5,
            "attempts": 1,
            "sample_index": 0,
        }
        for i in range(8)
    ]
    path = tmp_path / "transcripts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    flat = assert_agree(path)
    assert flat is not None and flat.num_rows == 8


def strict_rows(table: pa.Table) -> pa.Table:
    """What a Parquet file of ``table`` reads as, row by row (a null is given, not missing)."""
    return recorded_turns("t", *rows_to_turns("t", table.to_pylist()))


def test_a_typed_table_is_taken_as_it_is_and_equals_its_rows_validated_one_by_one() -> None:
    rows = [{"turn_index": 0, **turn(i)} for i in range(30)]
    held = pa.schema([field for field in RECORDED_FIELDS if any(field.name in row for row in rows)])
    table = pa.Table.from_pylist(rows, schema=held)
    assert {"raw", "seed", "error"} <= set(held.names)
    typed = typed_recording(table)
    assert typed is not None and typed.equals(strict_rows(table))
    # without a turn_index column every turn is turn 0, as a row without the key is
    single = pa.table({"case_id": ["a", "b"], "text": ["x.", "y."]})
    assert typed_recording(single).equals(strict_rows(single))  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "columns",
    [
        {"case_id": ["a"], "turn_index": pa.array([0.0]), "surface": ["x"]},  # a float is no turn index
        {"case_id": ["a"], "turn_index": pa.array([None], pa.int64()), "surface": ["x"]},
        {"case_id": pa.array([None], pa.string()), "surface": ["x"]},
        {"case_id": ["a"], "surface": pa.array([1])},
        {"case_id": ["a"], "surface": ["x"], "raw": ["not json"]},
        {"case_id": ["a", "a"], "surface": ["x", "y"]},  # recorded twice
        {"surface": ["x"]},
    ],
)
def test_a_table_that_is_not_typed_as_recorded_turns_is_validated_row_by_row(columns: dict[str, Any]) -> None:
    table = pa.table(columns)
    assert typed_recording(table) is None
    with pytest.raises(RuntimeSpecError, match=r"\n  t:[12]: "):
        strict_rows(table)
