"""Mutated case lines with a known verdict, for the fuzz tests and ``benchmarks/fuzz_cases.py``.

Each mutation starts from a valid case of a lane (its shipped case files) and either keeps it
valid (a different but equal JSON text: whitespace, key order, escapes, CRLF; or free text that
JSON allows but line splitters trip on) or breaks it in one known way (duplicate keys, coerced
types, NaN, lone surrogates, bad UTF-8, deep nesting, truncation, …). The verdict is the
mutation's, not the reader's, so the reader is checked against it.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from eval_pipeline.cases.jsonl import read_jsonl
from eval_pipeline.lanes import LaneSpec, lane_kind

JsonPath = tuple[str | int, ...]

# Where each lane's cases hold free text that may carry any character (a changed value that
# stays valid). The i18n lane's free text is a new accepted reference (a list).
FREE_TEXT: dict[str, str] = {
    "deterministic_fluency": "prompt",
    "articulation_of_status": "probe",
    "conversational_thread_coherence": "description",
    "i18n_prompt": "references",
    "refusal_calibration": "probe",
    "warmed_session_consistency": "description",
}
# Subtrees whose values are untyped on purpose (EvalCase context: any scalar).
UNTYPED = frozenset({"context"})
LINE_BREAKS_JSON_ALLOWS = ("\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


@dataclass(frozen=True)
class Mutated:
    """One physical line (no newline) and whether a correct reader must accept it."""

    raw: bytes
    valid: bool
    kind: str


def base_cases(spec: LaneSpec) -> list[dict[str, Any]]:
    """The valid cases of every split of a lane, as plain JSON objects."""
    paths = dict.fromkeys(path for split in spec.splits for path in spec.case_files(split))
    return [record.value for path in paths for record in read_jsonl(path)[0]]


def case_model(spec: LaneSpec) -> type[BaseModel]:
    return lane_kind(spec).case_model


# --- serialising a JSON value as a different but equal text -------------------------------


def _string(text: str, rng: random.Random, escape_rate: float) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"' or char == "\\":
            out.append("\\" + char)
        elif code < 0x20:
            out.append(f"\\u{code:04x}")
        elif rng.random() < escape_rate:
            if char == "/":
                out.append("\\/")
            elif code > 0xFFFF:  # a surrogate pair: valid JSON for one astral character
                high, low = divmod(code - 0x10000, 0x400)
                out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04X}")
            else:
                out.append(f"\\u{code:04X}" if rng.random() < 0.5 else f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def serialise(value: Any, rng: random.Random, *, spacing: float = 0.0, escapes: float = 0.0) -> str:
    """``value`` as JSON text with random (legal) whitespace, key order and string escapes."""

    def gap() -> str:
        return (
            "".join(rng.choice(" \t\r") for _ in range(rng.randint(1, 3))) if rng.random() < spacing else ""
        )

    def emit(item: Any) -> str:
        if isinstance(item, dict):
            keys = list(item)
            if spacing:
                rng.shuffle(keys)
            members = [
                f"{gap()}{_string(k, rng, escapes)}{gap()}:{gap()}{emit(item[k])}{gap()}" for k in keys
            ]
            return "{" + ",".join(members) + "}" if members else "{" + gap() + "}"
        if isinstance(item, list):
            return "[" + ",".join(f"{gap()}{emit(v)}{gap()}" for v in item) + "]" if item else "[]"
        if isinstance(item, str):
            return _string(item, rng, escapes)
        return json.dumps(item)

    return gap() + emit(value) + gap()


# --- where a case can be changed -----------------------------------------------------------


def leaves(value: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, Any]]:
    """Every scalar in ``value`` and its path, outside untyped subtrees."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not path and key in UNTYPED:
                continue
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path, value


def objects(value: Any, path: JsonPath = ()) -> Iterator[JsonPath]:
    """The path of every object (a model: extra keys forbidden), outside untyped subtrees."""
    if isinstance(value, dict):
        if not (path and path[0] in UNTYPED):
            yield path
        for key, item in value.items():
            yield from objects(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from objects(item, (*path, index))


def set_at(value: Any, path: JsonPath, new: Any) -> Any:
    changed = copy.deepcopy(value)
    target = changed
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return changed


MARK = "\u0000MUTATION\u0000"  # a placeholder replaced in the serialised text


def with_raw_value(value: dict[str, Any], path: JsonPath, raw: str, rng: random.Random) -> str:
    """The case serialised with the JSON text ``raw`` (which may be invalid) at ``path``."""
    text = serialise(set_at(value, path, MARK), rng)
    return text.replace(_string(MARK, rng, 0.0), raw, 1)


# --- the mutations ---------------------------------------------------------------------------

Mutation = Callable[[dict[str, Any], random.Random, type[BaseModel], str], tuple[str | bytes, bool]]


def _wrong_type_for(current: Any, rng: random.Random) -> Any:
    """A value of another JSON type that no field accepting ``current`` accepts (null may be optional)."""
    if isinstance(current, bool):
        return rng.choice(["yes", "on", "true", "1", "", 1, 0, 1.0, [], {}])
    if isinstance(current, int):
        return rng.choice([str(current), float(current), True, False, [current], {"v": current}])
    if isinstance(current, float):
        return rng.choice([str(current), True, [current]])
    if isinstance(current, str):
        return rng.choice([1, 0, 1.5, True, False, [current], {"v": current}])
    return rng.choice([[1], {"v": 1}])  # null where a value is optional: neither fits any field


def wrong_type(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    path, current = rng.choice(list(leaves(value)))
    return serialise(set_at(value, path, _wrong_type_for(current, rng)), rng), False


def duplicate_key(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    text = serialise(value, rng)
    first = rng.choice(['"id": "../../etc/passwd", ', f'"id": {json.dumps(value["id"])}, '])
    if rng.random() < 0.5:
        key = rng.choice(list(value))
        first = f"{json.dumps(key)}: {json.dumps(value[key])}, "
    return "{" + first + text[1:], False


def non_finite(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    raw = rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "1" + "0" * 400 + ".0"])
    if "context" in value or rng.random() < 0.3:
        context = dict(value.get("context", {}))
        context["budget"] = MARK
        text = serialise({**value, "context": context}, rng)
        return text.replace(_string(MARK, rng, 0.0), raw, 1), False
    path, _ = rng.choice(list(leaves(value)))
    return with_raw_value(value, path, raw, rng), False


def lone_surrogate(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    strings = [(p, v) for p, v in leaves(value) if isinstance(v, str)]
    path, current = rng.choice(strings)
    escape = rng.choice(["\\ud800", "\\udfff", "\\uDBFF", "\\ud83d", "\\ude00x", "\\ud800\\u0041"])
    at = rng.randint(0, len(current))
    raw = _string(current[:at], rng, 0.0)[:-1] + escape + _string(current[at:], rng, 0.0)[1:]
    return with_raw_value(value, path, raw, rng), False


def bad_utf8(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[bytes, bool]:
    text = serialise(value, rng).encode("utf-8")
    bad = rng.choice(
        [
            b"\xff",
            b"\xfe",
            b"\xc3\x28",
            b"\xc0\xaf",
            b"\xed\xa0\x80",
            b"\xe2\x82",
            b"\x80",
            b"\xf8\x88\x80\x80\x80",
        ]
    )
    quotes = [i for i, byte in enumerate(text) if byte == ord('"')]
    at = rng.choice(quotes) + 1
    return text[:at] + bad + text[at:], False


def deep_nesting(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    depth = rng.choice([65, 100, 1000, 5000, 100_000])
    opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
    path, _ = rng.choice(list(leaves(value)))
    return with_raw_value(value, path, opener * depth + "1" + closer * depth, rng), False


def truncated(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[bytes, bool]:
    text = serialise(value, rng).encode("utf-8")
    return text[: rng.randint(1, len(text) - 1)], False


def not_an_object(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    text = serialise(value, rng)
    return rng.choice([f"[{text}]", "null", "42", '"case"', "true", "[]", f"{text} {text}"]), False


def trailing_garbage(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    text = serialise(value, rng)
    return rng.choice(
        [text + " x", text + "}", text + ",", text + " {}", text[:-1] + ",}", text + " // note"]
    ), False


def control_character(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    text = serialise(value, rng)
    quotes = [i for i, char in enumerate(text) if char == '"']
    at = rng.choice(quotes) + 1
    # Not tab or CR: between tokens they are JSON whitespace. Not LF: it ends the line.
    char = chr(rng.choice([c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)]))
    return text[:at] + char + text[at:], False


def single_quotes(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    return serialise(value, rng).replace('"', "'"), False


def huge_integer(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    path, _ = rng.choice(list(leaves(value)))
    return with_raw_value(value, path, "9" * rng.choice([4301, 5000, 50_000]), rng), False


def missing_field(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    required = [name for name, field in model.model_fields.items() if field.is_required()]
    key = rng.choice(required)
    return serialise({k: v for k, v in value.items() if k != key}, rng), False


def unknown_field(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    path = rng.choice(list(objects(value)))
    name = rng.choice(["zz_extra", "Id", "id ", "schema-version", "\u0131d"])
    target = value
    for part in path:
        target = target[part]
    if name in target:
        name += "_"
    return serialise(set_at(value, (*path, name), 1) if path else {**value, name: 1}, rng), False


def bad_id(value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str) -> tuple[str, bool]:
    new = rng.choice(
        ["../../etc/passwd", "", "A.b", "a b.c", "x/../y.z", "-x.y", "é.x", "x\u2028.y", "x\x00.y"]
    )
    return serialise({**value, "id": new}, rng), False


def utf16_line(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[bytes, bool]:
    raw = serialise(value, rng).encode(rng.choice(["utf-16-le", "utf-16-be", "utf-32-le"]))
    return raw.replace(b"\n", b" "), False  # one physical line, whatever the encoding made of 0x0A


def equal_text(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    return serialise(value, rng, spacing=rng.random(), escapes=rng.random() * 0.5), True


def crlf(value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str) -> tuple[str, bool]:
    return serialise(value, rng, spacing=0.2) + "\r", True


def free_text_line_breaks(
    value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str
) -> tuple[str, bool]:
    field = FREE_TEXT[lane]
    extra = "".join(rng.choice(LINE_BREAKS_JSON_ALLOWS) for _ in range(rng.randint(1, 3)))
    text = f"see {extra} also \u00e9\U0001f600 <img src=x onerror=alert(1)> | [x](javascript:alert(1))"
    current = value.get(field)
    if field == "references":
        new: Any = [*(current or []), text]
    else:
        new = f"{current} {text}" if current else text
    return serialise({**value, field: new}, rng, escapes=rng.random() * 0.3), True


INVALID: tuple[Mutation, ...] = (
    wrong_type,
    duplicate_key,
    non_finite,
    lone_surrogate,
    bad_utf8,
    deep_nesting,
    truncated,
    not_an_object,
    trailing_garbage,
    control_character,
    single_quotes,
    huge_integer,
    missing_field,
    unknown_field,
    bad_id,
    utf16_line,
)
VALID: tuple[Mutation, ...] = (equal_text, crlf, free_text_line_breaks)


def mutate(value: dict[str, Any], rng: random.Random, model: type[BaseModel], lane: str) -> Mutated:
    """One mutated line: about a third stay valid, the rest break in one known way."""
    mutation = rng.choice(VALID) if rng.random() < 0.35 else rng.choice(INVALID)
    raw, valid = mutation(value, rng, model, lane)
    return Mutated(raw.encode("utf-8") if isinstance(raw, str) else raw, valid, mutation.__name__)


def mutated_file(
    bases: list[dict[str, Any]], model: type[BaseModel], lane: str, rng: random.Random, lines: int
) -> list[Mutated | None]:
    """``lines`` mutated cases, each with its own id, with blank lines (None) between some."""
    out: list[Mutated | None] = []
    for number in range(lines):
        if rng.random() < 0.05:
            out.append(None)
        base = {**rng.choice(bases)}
        base["id"] = f"{base['id']}.m{number}"
        out.append(mutate(base, rng, model, lane))
    return out


def file_bytes(lines: list[Mutated | None], rng: random.Random) -> bytes:
    blanks = [b"", b" ", b"\t", b"\r", b" \r"]
    return b"\n".join(rng.choice(blanks) if m is None else m.raw for m in lines) + b"\n"


def write_corpus(path: Path, lines: list[Mutated | None], rng: random.Random) -> dict[int, Mutated]:
    """Write the file; return the mutated line at each (1-based) line number."""
    path.write_bytes(file_bytes(lines, rng))
    return {number: m for number, m in enumerate(lines, start=1) if m is not None}


def write_fixture_corpus(folder: Path, specs: list[LaneSpec], *, lines: int = 200, seed: int = 2026) -> None:
    """(Re)write the committed corpus: ``<lane>.jsonl`` and ``<lane>.expected.json`` (verdict per line).

    Lines over 6 kB (the deepest nestings, the longest integers) become blank lines: the
    corpus stays small, and the benchmark covers those sizes.
    """
    for index, spec in enumerate(specs):
        rng = random.Random(seed + index)
        mutated = [
            m if m is None or len(m.raw) <= 6144 else None
            for m in mutated_file(base_cases(spec), case_model(spec), spec.name, rng, lines)
        ]
        expected = write_corpus(folder / f"{spec.name}.jsonl", mutated, rng)
        verdicts = {str(n): {"valid": m.valid, "kind": m.kind} for n, m in expected.items()}
        (folder / f"{spec.name}.expected.json").write_text(
            json.dumps(verdicts, indent=0) + "\n", encoding="utf-8"
        )


def read_fixture_corpus(folder: Path, lane: str) -> tuple[Path, dict[int, Mutated]]:
    path = folder / f"{lane}.jsonl"
    lines = path.read_bytes().split(b"\n")
    verdicts = json.loads((folder / f"{lane}.expected.json").read_text(encoding="utf-8"))
    return path, {int(n): Mutated(lines[int(n) - 1], v["valid"], v["kind"]) for n, v in verdicts.items()}
