"""The strict JSONL reader: each case of the hardening issue, and properties over arbitrary input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.cases.jsonl import MAX_DEPTH, parse_jsonl, read_jsonl


def lines_of(data: bytes) -> tuple[dict[int, dict[str, Any]], dict[int, list[str]]]:
    records, problems = parse_jsonl(data)
    reported: dict[int, list[str]] = {}
    for p in problems:
        reported.setdefault(p.line, []).append(f"{p.field}: {p.message}")
    return {r.line: r.value for r in records}, reported


def test_deep_nesting_is_a_problem_not_a_recursion_error() -> None:
    deep = '{"x":' + "[" * 1000 + "]" * 1000 + "}"
    records, problems = lines_of(f'{{"ok": 1}}\n{deep}\n{{"ok": 2}}\n'.encode())
    assert set(records) == {1, 3}
    assert problems == {2: [f"(line): nested deeper than {MAX_DEPTH} levels"]}
    # 100,000 levels too, and brackets inside strings do not count
    assert lines_of(("[" * 100_000).encode())[1][1][0].startswith("(line): nested deeper")
    assert lines_of(('{"s": "' + "[" * 500 + '"}').encode())[0] == {1: {"s": "[" * 500}}


def test_an_undecodable_line_is_that_lines_problem_and_the_rest_is_still_read() -> None:
    data = b'{"a": 1}\n{"a": "\xff"}\n{"a": \n{"a": "\xed\xa0\x80"}\n{"a": 5}\n'
    records, problems = lines_of(data)
    assert set(records) == {1, 5}
    assert set(problems) == {2, 3, 4}
    assert "not UTF-8: byte 0xff at column 8" in problems[2][0]


def test_a_utf16_file_is_named_as_such() -> None:
    data = '{"a": 1}\n'.encode("utf-16")
    assert lines_of(data)[1] == {1: ["(file): file is UTF-16 text; JSONL files must be UTF-8"]}


def test_lines_split_on_newline_only_so_json_line_separators_keep_line_numbers() -> None:
    text = '{"a": "x\u2028y\u2029z\x85"}\r\n\r{"b":\r1}\n\n{"c": bad}\n'
    records, problems = lines_of(text.encode())
    assert records == {1: {"a": "x\u2028y\u2029z\x85"}, 2: {"b": 1}}
    assert set(problems) == {4}


def test_duplicate_keys_are_rejected_at_any_depth() -> None:
    _, problems = lines_of(b'{"id":"../../etc/passwd","x":1,"id":"ok_1"}\n{"a":{"b":1,"b":1}}\n')
    assert problems[1] == ["id: duplicate key 'id' in one object (JSON readers disagree on which wins)"]
    assert problems[2][0].startswith("b: duplicate key 'b'")


def test_non_finite_numbers_and_lone_surrogates_are_rejected() -> None:
    data = b'{"a": NaN}\n{"a": -Infinity}\n{"a": 1e999}\n{"a": ["\\ud800"]}\n{"a": "\\ud83d\\ude00"}\n'
    records, problems = lines_of(data)
    assert records == {5: {"a": "\U0001f600"}}  # a surrogate pair is one valid character
    assert "NaN is not a JSON number" in problems[1][0]
    assert "-Infinity" in problems[2][0] and "too large" in problems[3][0]
    assert problems[4] == ["a[0]: holds a lone surrogate escape (\\ud800-\\udfff): not valid Unicode text"]


def test_empty_and_blank_files_directories_and_missing_files_are_problems(tmp_path: Path) -> None:
    assert lines_of(b"")[1] == {0: ["(file): file holds no records (it is empty or blank)"]}
    assert lines_of(b"\n \r\n\t\n")[1] == {0: ["(file): file holds no records (it is empty or blank)"]}
    assert read_jsonl(tmp_path)[1][0].message == "is a directory, not a JSONL file"
    assert read_jsonl(tmp_path / "nope.jsonl")[1][0].message == "file does not exist"


def test_a_utf8_byte_order_mark_is_tolerated() -> None:
    assert lines_of(b'\xef\xbb\xbf{"a": 1}\n')[0] == {1: {"a": 1}}


# --- properties --------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
json_text = st.text(st.characters(exclude_categories=("Cs",)))
json_values = st.recursive(
    json_scalars | json_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
    max_leaves=8,
)
json_objects = st.dictionaries(json_text, json_values, max_size=4)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_give_records_or_problems_never_an_exception(data: bytes) -> None:
    records, problems = parse_jsonl(data)
    physical = len(data.split(b"\n"))
    assert all(1 <= r.line <= physical for r in records)
    assert all(0 <= p.line <= physical for p in problems)
    assert not {r.line for r in records} & {p.line for p in problems}
    assert records or problems


@settings(max_examples=50, deadline=None)
@given(st.lists(json_objects, min_size=1, max_size=6), st.sampled_from([b"\n", b"\r\n"]), st.booleans())
def test_valid_objects_are_read_back_equal_at_their_line(
    objects: list[dict[str, Any]], newline: bytes, ascii_only: bool
) -> None:
    data = newline.join(json.dumps(o, ensure_ascii=ascii_only).encode() for o in objects) + newline
    records, problems = parse_jsonl(data)
    assert problems == []
    assert [(r.line, r.value) for r in records] == list(enumerate(objects, start=1))


@settings(max_examples=50, deadline=None)
@given(st.lists(json_objects, min_size=2, max_size=6), st.data())
def test_one_broken_line_is_reported_alone_at_its_number(objects: list[dict[str, Any]], data: Any) -> None:
    broken_at = data.draw(st.integers(0, len(objects) - 1))
    damage = data.draw(st.sampled_from([b"\xff", b"{", b"NaN", b"[" * 70, b'"\\udc00"']))
    lines = [json.dumps(o).encode() for o in objects]
    lines[broken_at] = b'{"k": ' + damage + b"}"
    records, problems = parse_jsonl(b"\n".join(lines))
    assert [p.line for p in problems] == [broken_at + 1]
    assert [r.line for r in records] == [n + 1 for n in range(len(objects)) if n != broken_at]
