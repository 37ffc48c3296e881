"""A case's page: its whole transcript and every verdict, sample by sample."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import duckdb

from eval_pipeline.failures import BLOCKING_SEVERITIES, evidence_object
from eval_pipeline.history.runs import RUN_MATCH, RunRef, is_missing
from eval_pipeline.viewer.pages.common import (
    NotFound,
    float_or_none,
    lane_runs,
    text_or_none,
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
        turns = con.execute(
            "SELECT case_id, coalesce(sample_index, 0) AS sample, turn_index, role, prompt, surface, "
            f"grounding_source, latency_ms, error, attempts, seed FROM transcripts WHERE {RUN_MATCH} "
            "AND case_id IN (SELECT unnest(?)) ORDER BY case_id, sample, turn_index",
            [*ref.params(), case_ids],
        ).df()
        verdicts = con.execute(
            "SELECT case_id, coalesce(sample_index, 0) AS sample, predicate, passed, severity, code, message, "
            f"evidence::VARCHAR AS evidence FROM case_predicates WHERE {RUN_MATCH} "
            "AND case_id IN (SELECT unnest(?)) ORDER BY case_id, sample, passed NULLS LAST, predicate",
            [*ref.params(), case_ids],
        ).df()
        turns_of = {str(c): rows for c, rows in turns.groupby("case_id", sort=False)}
        verdicts_of = {str(c): rows for c, rows in verdicts.groupby("case_id", sort=False)}
        for case_id in sorted(turns_of.keys() | verdicts_of.keys()):
            case_turns = turns_of.get(case_id, turns.iloc[:0])
            case_verdicts = verdicts_of.get(case_id, verdicts.iloc[:0])
            samples = [
                Sample(
                    index,
                    [_turn(row) for row in case_turns[case_turns["sample"] == index].to_dict("records")],
                    [
                        _verdict(row)
                        for row in case_verdicts[case_verdicts["sample"] == index].to_dict("records")
                    ],
                )
                for index in sorted({int(s) for s in (*case_turns["sample"], *case_verdicts["sample"])})
            ]
            verdict = worst([v.verdict for sample in samples for v in sample.verdicts])
            found.setdefault(case_id, []).append(CasePage(ref, case_id, verdict, samples))
    return found


def _turn(row: Mapping[Hashable, Any]) -> Turn:
    return Turn(
        int(row["turn_index"]),
        str(row["role"]),
        text_or_none(row["prompt"]),
        text_or_none(row["surface"]),
        text_or_none(row["grounding_source"]),
        float_or_none(row["latency_ms"]),
        text_or_none(row["error"]),
        None if is_missing(row["attempts"]) else int(row["attempts"]),
        None if is_missing(row["seed"]) else int(row["seed"]),
    )


def _verdict(row: Mapping[Hashable, Any]) -> CaseVerdict:
    passed = None if is_missing(row["passed"]) else bool(row["passed"])
    severity = text_or_none(row["severity"]) or ""
    return CaseVerdict(
        str(row["predicate"]),
        case_word(passed, severity),
        severity,
        text_or_none(row["code"]) or "",
        text_or_none(row["message"]) or "",
        evidence_object(row["evidence"]),
    )


def case_word(passed: bool | None, severity: str) -> str:
    """A case predicate's verdict word: a failed hard result fails, a failed report one warns."""
    if passed is None:
        return "n/a"
    if passed:
        return "pass"
    return "fail" if severity in BLOCKING_SEVERITIES else "warn"
