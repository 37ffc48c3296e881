"""Run a case's assertions on a candidate: findings stamped into §6 AssertionResults.

Importing this module registers every assertion family with the registry.
"""

from __future__ import annotations

from eval_pipeline.i18n import (  # noqa: F401 - imported to register their checks
    forbidden_renderings,
    max_chars,
    numbers,
    placeholder_integrity,
    protocol,
    required_tokens,
)
from eval_pipeline.i18n.case import EvalCase
from eval_pipeline.i18n.registry import get_check
from eval_pipeline.i18n.results import CANDIDATE_ERROR, AssertionResult, Candidate


def check_case(case: EvalCase, candidate: Candidate) -> list[AssertionResult]:
    """Every assertion of ``case`` on ``candidate``: one result when it passes, one per problem when not."""
    if candidate.case_id != case.id:
        raise ValueError(f"candidate for {candidate.case_id!r} checked against case {case.id!r}")
    results: list[AssertionResult] = []
    for spec in case.assertions:
        for finding in get_check(spec.name)(case, spec, candidate):
            results.append(
                AssertionResult(
                    case_id=case.id,
                    assertion=spec.name,
                    passed=finding.passed,
                    severity=spec.severity,
                    code=finding.code,
                    message=finding.message,
                    evidence=finding.evidence,
                )
            )
    return results


def error_results(case: EvalCase, error: str) -> list[AssertionResult]:
    """A candidate that could not be produced fails every assertion of its case."""
    return [
        AssertionResult(
            case_id=case.id,
            assertion=spec.name,
            passed=False,
            severity=spec.severity,
            code=CANDIDATE_ERROR,
            message=f"No candidate: the runtime failed ({error}).",
            evidence={"error": error},
        )
        for spec in case.assertions
    ]
