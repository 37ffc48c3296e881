"""Flat JSONL records read by Arrow, where Arrow reads exactly what the strict reader would.

:mod:`eval_pipeline.cases.jsonl` is the one definition of what a JSONL file holds; it parses a
line at a time in Python. A file of flat records (every value a string, a whole number, a
number or null, under a known key) can be read by Arrow's JSON reader, in C, and
:func:`read_flat_jsonl` does so only when that reads the same records the strict reader would.
Anything else returns None and the caller reads the file the strict way, which also says what
is wrong, line by line.

Why the two agree when :func:`read_flat_jsonl` returns a table:

- Every line that holds anything starts with ``{`` and ends with ``}`` (after JSON whitespace),
  and Arrow finds as many records as there are such lines: one object per line (an object
  cannot end one line and go on at the start of the next, so no record spans lines and none
  shares one).
- Every key is one of ``schema``'s (``unexpected_field_behavior="error"``) and every value has
  its column's type or is null: no nested value, so nothing deeper than the strict reader's
  limit; a key given twice, a lone surrogate escape or a control character in a string fail
  in Arrow as they do in the strict reader.
- The bytes are UTF-8, checked by Python's decoder (Arrow takes an overlong sequence).
- ``NaN`` and ``Infinity``, which Arrow reads as numbers and the strict reader refuses, do not
  occur in the file at all.
- A null where the model takes no null (``required``) is the strict reader's to report; a null
  in a column with a default (``defaults``) is read as the default only where the record does
  not give the key (a missing key, not a null).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from eval_pipeline.cases.jsonl import parse_json_line

_BLANK = b" \t\r"  # JSON whitespace on a line (lines are split on \n)
_NOT_JSON_NUMBERS = (b"NaN", b"Infinity")
_BLOCK = 1 << 25  # bytes read at a time, cut at a line end: memory stays bounded


def read_flat_jsonl(
    path: Path,
    schema: pa.Schema,
    *,
    required: Sequence[str] = (),
    defaults: Mapping[str, Any] | None = None,
) -> pa.Table | None:
    """Every record of the JSONL file at ``path`` as a table of ``schema`` (a column a record
    leaves out is null, or its default), or None: Arrow might not read what the strict reader
    reads (see the module's reasons), or the file holds no record."""
    options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    tables: list[pa.Table] = []
    try:
        for block in _blocks(path):
            table = _block_table(block, options, required, defaults or {})
            if table is None:
                return None
            tables.append(table)
    except (pa.ArrowException, UnicodeDecodeError, OSError):
        return None
    tables = [table for table in tables if table.num_rows]
    return pa.concat_tables(tables) if tables else None


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's bytes, about :data:`_BLOCK` at a time, each ending where a line ends."""
    with path.open("rb") as handle:
        rest = b""
        while True:
            chunk = handle.read(_BLOCK)
            if not chunk:
                if rest:
                    yield rest
                return
            cut = chunk.rfind(b"\n")
            if cut < 0:
                rest += chunk
                continue
            yield rest + chunk[: cut + 1]
            rest = chunk[cut + 1 :]


def _block_table(
    block: bytes, options: pa_json.ParseOptions, required: Sequence[str], defaults: Mapping[str, Any]
) -> pa.Table | None:
    if any(word in block for word in _NOT_JSON_NUMBERS):
        return None
    block.decode("utf-8")  # Arrow does not check: raises on bytes that are not UTF-8
    lines = _record_lines(block)
    if lines is None:
        return None
    if not lines:
        return options.explicit_schema.empty_table()
    table = pa_json.read_json(pa.py_buffer(block), parse_options=options)
    if table.num_rows != len(lines) or any(table[name].null_count for name in required):
        return None
    for name, default in defaults.items():
        column = table[name]
        if column.null_count:
            if _gives_null(block, lines, column, name):
                return None
            filled = pc.fill_null(column, pa.scalar(default, column.type))
            table = table.set_column(table.schema.get_field_index(name), name, filled)
    return table


def _record_lines(block: bytes) -> list[bytes] | None:
    """The lines of ``block`` that hold something, without their JSON whitespace, when each is
    one ``{…}``; None when one is not."""
    lines = block.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the block ends with a line's end
    # The common file, told at C speed: no blank line, no whitespace around a record (a \n
    # cannot occur inside a JSON string, so each "}\n" and "\n{" is a record's end and start).
    if (
        block[:1] == b"{"
        and lines[-1][-1:] == b"}"
        and block.count(b"\n{") == len(lines) - 1
        and block.count(b"}\n") == block.count(b"\n")
    ):
        return lines
    held: list[bytes] = []
    for line in lines:
        line = line.strip(_BLANK)
        if line:
            if line[0] != 0x7B or line[-1] != 0x7D:  # { … }
                return None
            held.append(line)
    return held


def _gives_null(block: bytes, lines: list[bytes], column: pa.ChunkedArray, key: str) -> bool:
    """Whether a record of ``lines`` whose ``column`` is null gives ``key`` (as null), or might:
    only a line that spells the key, or holds an escape that could spell a character of it, is
    parsed to tell."""
    spelt = f'"{key}"'
    escape = _ASCII_ESCAPE if key.isascii() and key.isidentifier() else _ANY_ESCAPE
    if spelt.encode() not in block and not re.search(escape.encode(), block):
        return False
    held = pa.array(lines, pa.binary())
    may_name = pc.or_(pc.match_substring(held, spelt), pc.match_substring_regex(held, escape))
    for row in pc.indices_nonzero(pc.and_(pc.is_null(column.combine_chunks()), may_name)).to_pylist():
        record = parse_json_line(lines[row])
        if not isinstance(record, dict) or key in record:
            return True
    return False


# An escape that may spell a character of a key: any, or for a key of ASCII letters, digits and
# underscores (which no short escape such as \/ spells) only a \uXXXX of U+0020 to U+007F: most
# escapes in a file are of other characters (a dash, an accented letter).
_ANY_ESCAPE = r"\\"
_ASCII_ESCAPE = r"\\u00[2-7][0-9A-Fa-f]"
