"""A case's page: its whole transcript and every verdict, sample by sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from eval_pipeline.failures import BLOCKING_SEVERITIES, evidence_object
from eval_pipeline.history.runs import RUN_MATCH, RunRef
from eval_pipeline.viewer.pages.common import (
    NotFound,
    lane_runs,
    worst,
)


@dataclass(frozen=True)
class Turn:
    turn_index: int
    role: str
    prompt: str | None
    surface: str | None
    grounding_source: str | None
    latency_ms: float | None
    error: str | None
    attempts: int | None
    seed: int | None


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
                "SELECT case_id, coalesce(sample_index, 0), turn_index, role, prompt, surface, "
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
        for case_id in sorted({case for case, _ in (*turns, *verdicts)}):
            indexes = sorted({index for case, index in (*turns, *verdicts) if case == case_id})
            samples = [
                Sample(
                    index,
                    sorted(
                        (Turn(*row) for row in turns.get((case_id, index), [])), key=lambda t: t.turn_index
                    ),
                    sorted(
                        (_verdict(*row) for row in verdicts.get((case_id, index), [])),
                        key=lambda v: (v.verdict == "n/a", v.verdict == "pass", v.predicate),
                    ),
                )
                for index in indexes
            ]
            verdict = worst([v.verdict for sample in samples for v in sample.verdicts])
            found.setdefault(case_id, []).append(CasePage(ref, case_id, verdict, samples))
    return found


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
