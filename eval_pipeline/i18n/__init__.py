"""EvalCase v1 translation cases (seed 004): the case schema, the candidate and result records,
the assertion vocabulary and its checks, and prompt composition that never reads locked cases."""

from eval_pipeline.i18n.case import EvalCase, Provenance
from eval_pipeline.i18n.checks import check_case, error_results
from eval_pipeline.i18n.params import ASSERTION_NAMES, AssertionSpec
from eval_pipeline.i18n.registry import registered_assertions
from eval_pipeline.i18n.results import AssertionResult, Candidate

__all__ = [
    "ASSERTION_NAMES",
    "AssertionResult",
    "AssertionSpec",
    "Candidate",
    "EvalCase",
    "Provenance",
    "check_case",
    "error_results",
    "registered_assertions",
]
