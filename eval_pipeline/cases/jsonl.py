"""The one JSONL reader: bytes in, one JSON object per physical line out, or a problem per line.

Every JSONL file the project reads (case files, replay files, candidates) goes through
:func:`read_jsonl`, so every command accepts exactly the same inputs. The reader is total: it
never raises on content, and each bad line is reported at its own line number while the rest
of the file is still read.

- Lines are split on ``\\n`` only (a trailing ``\\r`` is dropped, so CRLF files work).
  ``str.splitlines`` would also split on U+2028, U+0085 or a lone CR, which are legal inside
  JSON, and shift every later line number.
- Each line is decoded on its own: an undecodable byte is that line's problem. A line longer
  than :data:`MAX_LINE_BYTES` ends the file's reading with a problem, and only a regular file is
  read (``/dev/zero`` would never end).
- JSON is parsed strictly: duplicate keys, NaN / Infinity (and numbers too big for a float),
  nesting deeper than :data:`MAX_DEPTH` and lone surrogate escapes (text that cannot be
  written back as UTF-8) are problems, not silently accepted values.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

MAX_DEPTH = 64
MAX_LINE_BYTES = 16 << 20  # a line (one case, one recorded turn) longer than this is a problem
BLANK = frozenset(b" \t\r")  # JSON whitespace; a line of only these holds no record
_BLANK_BYTES = bytes(sorted(BLANK))
_UTF8_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class JsonLine:
    """One record of a JSONL file: its 1-based physical line number and the parsed object."""

    line: int
    value: dict[str, Any]


@dataclass(frozen=True)
class LineProblem:
    """Why one line (0: the whole file) holds no record; ``field`` is a dotted path or ``(line)``."""

    line: int
    field: str
    message: str


class _Rejected(ValueError):
    """A JSON construct the strict parser refuses; ``field`` says where, when known."""

    def __init__(self, message: str, field: str = "(line)") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class LineRange:
    """Consecutive lines of a file: from byte ``start`` (where a line starts), ``count`` lines
    (None: to the end), the first of them numbered ``first_line``."""

    start: int
    first_line: int
    count: int | None


def read_jsonl(path: Path) -> tuple[list[JsonLine], list[LineProblem]]:
    """Every record of the file at ``path`` and every problem, in line order. Never raises on content."""
    return _collect(iter_jsonl(path))


def iter_jsonl(path: Path, lines: LineRange | None = None) -> Iterator[JsonLine | LineProblem]:
    """:func:`read_jsonl` one line at a time (a big file is never held whole), in line order;
    with ``lines``, only those (one of :func:`line_ranges`: whether the file holds a record at
    all is the whole file's question, not a range's)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        yield LineProblem(0, "(file)", "file does not exist")
        return
    except IsADirectoryError:
        yield LineProblem(0, "(file)", "is a directory, not a JSONL file")
        return
    except OSError as exc:
        yield LineProblem(0, "(file)", f"cannot be read: {exc.strerror or exc}")
        return
    with handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            yield LineProblem(0, "(file)", "not a regular file (a device, pipe or socket): name a file")
            return
        try:
            if lines is None:
                yield from _lines_of(_bounded_lines(handle, 1))
            else:
                handle.seek(lines.start)
                numbered = islice(_bounded_lines(handle, lines.first_line), lines.count)
                yield from _lines_of(numbered, whole=False)
        except _LineTooLong as exc:
            yield LineProblem(
                exc.line,
                "(line)",
                f"longer than {MAX_LINE_BYTES >> 20} MB; the rest of the file was not read",
            )
        except OSError as exc:
            yield LineProblem(0, "(file)", f"cannot be read: {exc.strerror or exc}")


class _LineTooLong(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def _bounded_lines(handle: BinaryIO, first: int) -> Iterator[tuple[int, bytes]]:
    """The file's lines numbered from ``first``, none held past MAX_LINE_BYTES (a file without a
    newline, however big, is never read whole)."""
    number = first
    while line := handle.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES:
            raise _LineTooLong(number)
        yield number, line
        number += 1


def parse_jsonl(data: bytes) -> tuple[list[JsonLine], list[LineProblem]]:
    """Records and problems of JSONL ``data``. An empty file (no record, no problem) is a problem."""
    return _collect(_lines_of(enumerate(data.split(b"\n"), start=1)))


def _collect(items: Iterator[JsonLine | LineProblem]) -> tuple[list[JsonLine], list[LineProblem]]:
    records: list[JsonLine] = []
    problems: list[LineProblem] = []
    for item in items:
        (records if isinstance(item, JsonLine) else problems).append(item)  # type: ignore[arg-type]
    return records, problems


def _lines_of(numbered: Iterator[tuple[int, bytes]], whole: bool = True) -> Iterator[JsonLine | LineProblem]:
    """Records and problems of physical lines split on ``\\n`` (each may keep its ``\\n``);
    ``whole``: they are a whole file's (one without a record is a problem)."""
    found = False
    for number, line in numbered:
        raw = line[:-1] if line.endswith(b"\n") else line
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        if number == 1:
            for bom, encoding in _WIDE_BOMS.items():
                if raw.startswith(bom):
                    yield LineProblem(1, "(file)", f"file is {encoding} text; JSONL files must be UTF-8")
                    return
            if raw.startswith(_UTF8_BOM):  # some editors write one; it is not part of the first record
                raw = raw[len(_UTF8_BOM) :]
        if not raw.strip(_BLANK_BYTES):
            continue
        found = True
        value = parse_json_line(raw)
        yield (
            LineProblem(number, value.field, value.message)
            if isinstance(value, LineProblem)
            else JsonLine(number, value)
        )
    if whole and not found:
        yield LineProblem(0, "(file)", "file holds no records (it is empty or blank)")


def line_ranges(path: Path, parts: int, min_lines: int) -> list[LineRange]:
    """The file at ``path`` cut at line starts into at most ``parts`` ranges of about equal
    bytes, each with the number of its first line, to be read side by side; ``[]`` when the
    file is better read whole: fewer than ``min_lines`` lines, or a first line that is blank or
    starts with a byte-order mark (which only the whole file's reader judges: a range after
    line 1 of a UTF-16 file, or of a blank file, would report what the whole file does not)."""
    size = path.stat().st_size
    if parts < 2 or size < max(min_lines, 1):  # every line takes at least one byte
        return []
    with path.open("rb") as handle:
        first = handle.readline()
        if not first.strip(_BLANK_BYTES + b"\n") or first.startswith((_UTF8_BOM, *_WIDE_BOMS)):
            return []
        starts = [0]
        for part in range(1, parts):
            handle.seek(max(size * part // parts - 1, 0))
            handle.readline()  # to the start of the next line
            if starts[-1] < handle.tell() < size:
                starts.append(handle.tell())
        counts = [
            _newlines(handle, start, end) for start, end in zip(starts, [*starts[1:], size], strict=True)
        ]
        handle.seek(size - 1)
        unterminated = handle.read(1) != b"\n"  # a last line without its \n is a line too
    if len(starts) < 2 or sum(counts) + unterminated < min_lines:
        return []
    first_lines = [1 + sum(counts[:index]) for index in range(len(starts))]
    return [
        LineRange(start, first_line, count if index < len(starts) - 1 else None)
        for index, (start, first_line, count) in enumerate(zip(starts, first_lines, counts, strict=True))
    ]


def _newlines(handle: BinaryIO, start: int, end: int) -> int:
    handle.seek(start)
    count = 0
    while start < end:
        chunk = handle.read(min(_CHUNK, end - start))
        if not chunk:
            break
        count += chunk.count(b"\n")
        start += len(chunk)
    return count


_CHUNK = 1 << 24


def parse_json_line(raw: bytes) -> dict[str, Any] | LineProblem:
    """One line as a JSON object, or the reason it is not one (its ``line`` is 0: the caller knows)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return LineProblem(
            0, "(line)", f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1} ({exc.reason})"
        )
    depth_problem = _depth_problem(text)
    if depth_problem is not None:
        return LineProblem(0, "(line)", depth_problem)
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        # Some of the json module's messages end in "at" already ("Invalid control character at").
        return LineProblem(
            0, "(line)", f"not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}"
        )
    except _Rejected as exc:
        return LineProblem(0, exc.field, str(exc))
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        return LineProblem(0, "(line)", f"not acceptable JSON: {exc}")
    if not isinstance(value, dict):
        return LineProblem(0, "(line)", f"expected a JSON object per line, got {_json_type(value)}")
    # UTF-8 text cannot hold a surrogate: only a \uD8xx-\uDFxx escape can, so a line without
    # one needs no walk (most lines of a big file).
    surrogate_at = _lone_surrogate_path(value, "") if _MAY_ESCAPE_SURROGATE.search(text) else None
    if surrogate_at is not None:
        return LineProblem(
            0,
            surrogate_at or "(line)",
            "holds a lone surrogate escape (\\ud800-\\udfff): not valid Unicode text",
        )
    return value


def _depth_problem(text: str) -> str | None:
    """Nesting deeper than MAX_DEPTH, found by one scan (the parser would recurse and crash)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
        elif char in "]}":
            depth -= 1
    return None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)  # built in C; a repeated key makes it shorter than the pairs
    if len(result) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Rejected(
                    f"duplicate key {key!r} in one object (JSON readers disagree on which wins)", key
                )
            seen.add(key)
    return result


def _no_constant(name: str) -> Any:
    raise _Rejected(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Rejected(f"number {text[:40]} is too large for a 64-bit float")
    return value


# One strict decoder for every line (json.loads with hooks would build one per call).
_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite_float
)
_MAY_ESCAPE_SURROGATE = re.compile(r"\\u[dD]")


def _lone_surrogate_path(value: Any, path: str) -> str | None:
    """The field path of the first string (or key) holding a lone surrogate, else None."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if _SURROGATE.search(key):
                return path or "(line)"
            found = _lone_surrogate_path(item, child)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _lone_surrogate_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
