"""A case's page: its whole transcript and every verdict, sample by sample; and one text of it
whole (the page previews long ones)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import duckdb

from eval_pipeline.history.runs import RUN_MATCH, RunRef
from eval_pipeline.outcome import BLOCKING_SEVERITIES, HARD, FailingItem, committed_outcome, evidence_object
from eval_pipeline.viewer.links import TEXT_FIELDS, TextRef
from eval_pipeline.viewer.pages.common import (
    NotFound,
    Preview,
    lane_runs,
    preview,
    preview_sql,
    worst,
)


@dataclass(frozen=True)
class TurnVerdict:
    predicate: str
    verdict: str  # pass, fail (a hard item), warn (a reporting one), n/a
    code: str
    reason: str


@dataclass(frozen=True)
class Turn:
    turn_index: int
    role: str
    prompt: Preview | None
    surface: Preview | None
    grounding_source: str | None
    latency_ms: float | None
    error: str | None
    attempts: int | None
    seed: int | None
    verdicts: tuple[TurnVerdict, ...] = ()  # of a case judged per turn


@dataclass(frozen=True)
class CaseVerdict:
    predicate: str
    verdict: str  # pass, fail (a hard result), warn (a report one), n/a
    severity: str
    code: str
    reason: str
    evidence: dict[str, Any]


@dataclass(frozen=True)
class Sample:
    index: int
    turns: list[Turn]
    verdicts: list[CaseVerdict]


@dataclass(frozen=True)
class CasePage:
    ref: RunRef
    case_id: str
    verdict: str
    samples: list[Sample]


def case_pages(con: duckdb.DuckDBPyConnection, run_id: str, case_id: str) -> list[CasePage]:
    """The case's whole transcript in every lane run under ``run_id`` that has it: each sample's
    turns (prompt, surface, grounding, latency, fault) and its verdicts (code, reason, evidence)."""
    pages = cases_in_run(con, run_id, [case_id]).get(case_id)
    if not pages:
        raise NotFound(f"no case {case_id!r} in run {run_id!r}")
    return pages


def cases_in_run(
    con: duckdb.DuckDBPyConnection, run_id: str, case_ids: list[str]
) -> dict[str, list[CasePage]]:
    """:func:`case_pages` of several cases of one run, read in two queries per lane run; a case
    the run does not hold is left out."""
    found: dict[str, list[CasePage]] = {}
    for ref in lane_runs(con, run_id):
        turns = _by_case_and_sample(
            con.execute(
                f"SELECT case_id, coalesce(sample_index, 0), turn_index, role, {preview_sql('prompt')}, "
                f"{preview_sql('surface')}, "
                f"grounding_source, latency_ms, error, attempts, seed FROM transcripts WHERE {RUN_MATCH} "
                "AND case_id IN (SELECT unnest(?))",
                [*ref.params(), case_ids],
            ).fetchall()
        )
        verdicts = _by_case_and_sample(
            con.execute(
                "SELECT case_id, coalesce(sample_index, 0), predicate, passed, severity, code, message, "
                f"evidence::VARCHAR FROM case_predicates WHERE {RUN_MATCH} AND case_id IN (SELECT unnest(?))",
                [*ref.params(), case_ids],
            ).fetchall()
        )
        per_turn = _turn_verdicts(con, ref, case_ids, verdicts)
        outcome = committed_outcome(con, ref)
        for case_id in sorted({case for case, _ in (*turns, *verdicts)}):
            indexes = sorted({index for case, index in (*turns, *verdicts) if case == case_id})
            items = (
                {}
                if outcome is None
                else {(i.turn_index, i.predicate): i for i in outcome.items_of([case_id])}
            )
            samples = [
                Sample(
                    index,
                    sorted(
                        (
                            _turn(
                                row,
                                per_turn.get((case_id, index, int(row[0])), []),
                                items,
                                TextRef(ref.run_id, ref.series, case_id, index, int(row[0])),
                            )
                            for row in turns.get((case_id, index), [])
                        ),
                        key=lambda t: t.turn_index,
                    ),
                    sorted(
                        (_verdict(*row) for row in verdicts.get((case_id, index), [])),
                        key=lambda v: (v.verdict == "n/a", v.verdict == "pass", v.predicate),
                    ),
                )
                for index in indexes
            ]
            verdict = (
                outcome.case_verdict(case_id)
                if outcome is not None
                else worst([v.verdict for sample in samples for v in sample.verdicts])
            )
            found.setdefault(case_id, []).append(CasePage(ref, case_id, verdict, samples))
    return found


def _turn_verdicts(
    con: duckdb.DuckDBPyConnection,
    ref: RunRef,
    case_ids: list[str],
    case_rows: dict[tuple[str, int], list[tuple[Any, ...]]],
) -> dict[tuple[str, int, int], list[tuple[str, bool | None]]]:
    """Each turn's verdicts (predicate, passed) of the cases without case rows (judged per turn)."""
    judged_per_turn = sorted({case for case in case_ids if not any(c == case for c, _ in case_rows)})
    if not judged_per_turn:
        return {}
    rows = con.execute(
        "SELECT case_id, coalesce(sample_index, 0), turn_index, predicate, passed FROM turn_verdicts "
        f"WHERE {RUN_MATCH} AND case_id IN (SELECT unnest(?)) ORDER BY predicate",
        [*ref.params(), judged_per_turn],
    ).fetchall()
    grouped: dict[tuple[str, int, int], list[tuple[str, bool | None]]] = {}
    for case_id, sample, turn, predicate, passed in rows:
        grouped.setdefault((str(case_id), int(sample), int(turn)), []).append((str(predicate), passed))
    return grouped


def _turn(
    row: tuple[Any, ...],
    verdicts: list[tuple[str, bool | None]],
    items: dict[tuple[int | None, str], FailingItem],
    where: TextRef,
) -> Turn:
    """A transcript row (its prompt and surface previewed, each linking to ``where``'s text) with
    its verdicts; a failed one reads as its outcome item says (severity, reason)."""
    (
        turn_index,
        role,
        prompt,
        prompt_length,
        surface,
        surface_length,
        grounding,
        latency,
        error,
        attempts,
        seed,
    ) = row
    shown = []
    for predicate, passed in verdicts:
        item = items.get((turn_index, predicate))
        if passed is None or passed:
            shown.append(TurnVerdict(predicate, "n/a" if passed is None else "pass", "", ""))
        elif item is not None:
            shown.append(
                TurnVerdict(predicate, "fail" if item.severity == HARD else "warn", item.code, item.reason)
            )
        else:
            shown.append(
                TurnVerdict(predicate, "fail", "", "failed (not among the failing items the run kept)")
            )
    texts = (
        preview(prompt, prompt_length, replace(where, field="prompt")),
        preview(surface, surface_length, where),
    )
    return Turn(int(turn_index), role, *texts, grounding, latency, error, attempts, seed, tuple(shown))


def _by_case_and_sample(rows: list[tuple[Any, ...]]) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
    """Rows keyed by their first two columns (case id, sample), the rest of each row kept."""
    grouped: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    for case_id, sample, *rest in rows:
        grouped.setdefault((str(case_id), int(sample)), []).append(tuple(rest))
    return grouped


def _verdict(
    predicate: str,
    passed: bool | None,
    severity: str | None,
    code: str | None,
    message: str | None,
    evidence: str | None,
) -> CaseVerdict:
    return CaseVerdict(
        str(predicate),
        case_word(passed, severity or ""),
        severity or "",
        code or "",
        message or "",
        evidence_object(evidence),
    )


def case_word(passed: bool | None, severity: str) -> str:
    """A case predicate's verdict word: a failed hard result fails, a failed report one warns."""
    if passed is None:
        return "n/a"
    if passed:
        return "pass"
    return "fail" if severity in BLOCKING_SEVERITIES else "warn"


def transcript_text(con: duckdb.DuckDBPyConnection, where: TextRef) -> str:
    """The text ``where`` names, whole (a page shows its :class:`Preview`); :class:`NotFound`
    when history holds no such turn or the turn has no such text (a fault, transcripts not kept)."""
    if where.field not in TEXT_FIELDS:
        raise ValueError(f"field must be one of {', '.join(TEXT_FIELDS)}, got {where.field!r}")
    ref = RunRef(where.run_id, where.series)
    row = con.execute(
        f"SELECT {where.field} FROM transcripts WHERE {RUN_MATCH} AND case_id = ? "
        "AND coalesce(sample_index, 0) = ? AND turn_index = ? LIMIT 1",
        [*ref.params(), where.case_id, where.sample, where.turn],
    ).fetchone()
    if row is None or row[0] is None:
        raise NotFound(
            f"no {where.field} of turn {where.turn} of sample {where.sample} of case {where.case_id!r} "
            f"in run {where.run_id!r} ({where.series.label})"
        )
    return str(row[0])
