"""The batch protocol and ``protocol_complete``.

A batch request numbers its items ``[1] …`` to ``[N] …``, one per line. A complete reply has
exactly those numbered lines, in order, each non-empty, and, when the case names a
terminator, ends with the terminator alone on its last non-blank line. Blank lines are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from eval_pipeline.i18n.case import EvalCase
from eval_pipeline.i18n.params import ProtocolComplete
from eval_pipeline.i18n.registry import assertion_check
from eval_pipeline.i18n.results import Candidate, Finding, fail, ok

_ITEM = re.compile(r"^\[(\d+)\][ \t]?(.*)$")


def render_batch(items: Sequence[str]) -> str:
    """Items as the protocol numbers them."""
    return "\n".join(f"[{number}] {item}" for number, item in enumerate(items, start=1))


@dataclass(frozen=True)
class ParsedItem:
    number: int
    text: str
    line: int


@dataclass(frozen=True)
class ParsedBatch:
    items: tuple[ParsedItem, ...]
    malformed: tuple[tuple[int, str], ...]  # (line number, line) of lines that are not items
    terminator_line: int | None  # line number of the exact terminator, when present
    after_terminator: tuple[tuple[int, str], ...]
    near_terminator: tuple[tuple[int, str], ...]  # lines that resemble the terminator but are not it


def parse_batch(raw: str, terminator: str | None) -> ParsedBatch:
    items: list[ParsedItem] = []
    malformed: list[tuple[int, str]] = []
    after: list[tuple[int, str]] = []
    near: list[tuple[int, str]] = []
    terminator_line: int | None = None
    for number, line in enumerate(raw.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if terminator is not None and terminator_line is None and stripped == terminator:
            terminator_line = number
            continue
        if terminator_line is not None:
            after.append((number, stripped))
            continue
        match = _ITEM.match(stripped)
        if terminator is not None and _resembles(stripped, terminator):
            near.append((number, stripped))
            if match is None:
                continue
        if match is None:
            malformed.append((number, stripped))
        else:
            items.append(ParsedItem(int(match.group(1)), match.group(2).strip(), number))
    return ParsedBatch(tuple(items), tuple(malformed), terminator_line, tuple(after), tuple(near))


def decode_batch(raw: str, expected_items: int, terminator: str | None) -> str:
    """The candidate text of a batch reply: item texts 1..N (first occurrence; missing ones empty), one per line."""
    first: dict[int, str] = {}
    for item in parse_batch(raw, terminator).items:
        first.setdefault(item.number, item.text)
    return "\n".join(first.get(n, "") for n in range(1, expected_items + 1))


def expected_item_count(case: EvalCase, spec: ProtocolComplete) -> int:
    return spec.params.expected_items or len(case.batch_items())


@assertion_check("protocol_complete")
def protocol_complete(case: EvalCase, spec: ProtocolComplete, candidate: Candidate) -> list[Finding]:
    raw = candidate.raw_response
    if raw is None or not raw.strip():
        return [fail("protocol_no_response", "There is no raw batch response to inspect.")]
    expected = expected_item_count(case, spec)
    terminator = spec.params.terminator
    batch = parse_batch(raw, terminator)
    findings: list[Finding] = [
        fail(
            "protocol_malformed_item",
            f"Line {line} is not a numbered item '[n] text': {text!r}.",
            line=line,
            text=text,
        )
        for line, text in batch.malformed
    ]
    seen: set[int] = set()
    previous = 0
    for item in batch.items:
        where = {"item": item.number, "line": item.line}
        if item.number in seen:
            findings.append(
                fail("protocol_duplicate_item", f"Item [{item.number}] appears more than once.", **where)
            )
            continue
        seen.add(item.number)
        if item.number < 1 or (item.number > expected and not spec.params.allow_extra_items):
            findings.append(
                fail(
                    "protocol_extra_item",
                    f"Item [{item.number}] is beyond the {expected} requested.",
                    **where,
                )
            )
        elif item.number < previous:
            findings.append(
                fail("protocol_out_of_order", f"Item [{item.number}] comes after [{previous}].", **where)
            )
        if not item.text:
            findings.append(fail("protocol_empty_item", f"Item [{item.number}] is empty.", **where))
        previous = max(previous, item.number)
    highest = max(seen, default=0)
    for number in range(1, expected + 1):
        if number in seen:
            continue
        if number < highest:
            findings.append(
                fail("protocol_item_gap", f"Item [{number}] is skipped; later items follow.", item=number)
            )
        else:
            findings.append(
                fail("protocol_missing_item", f"Item [{number}] of {expected} is missing.", item=number)
            )
    if terminator is not None:
        findings.extend(_terminator_findings(batch, terminator))
    if findings:
        return findings
    return [ok(f"All {expected} items are present in order.", items=expected, terminator=terminator)]


def _terminator_findings(batch: ParsedBatch, terminator: str) -> list[Finding]:
    if batch.terminator_line is None:
        if batch.near_terminator:
            line, text = batch.near_terminator[-1]
            return [
                fail(
                    "protocol_malformed_terminator",
                    f"Line {line} resembles the terminator {terminator!r} but is not exactly it: {text!r}.",
                    line=line,
                    text=text,
                    expected=terminator,
                )
            ]
        return [
            fail(
                "protocol_missing_terminator",
                f"The terminator line {terminator!r} is missing.",
                expected=terminator,
            )
        ]
    if batch.after_terminator:
        line, text = batch.after_terminator[0]
        return [
            fail(
                "protocol_malformed_terminator",
                f"The terminator {terminator!r} is not the last line: line {line} follows it.",
                line=line,
                text=text,
                expected=terminator,
            )
        ]
    return []


def _resembles(line: str, terminator: str) -> bool:
    """A line that is the terminator modulo case, spacing or punctuation, or carries it inside."""
    squash = re.compile(r"[\W_]+")
    target = squash.sub("", terminator).casefold()
    return bool(target) and (squash.sub("", line).casefold() == target or terminator in line)
