"""Pure predicate functions, by family, and the registry that finds them by name.

Every module of this package is discovered on the first lookup: a new family is a new
module whose functions carry ``@turn_predicate``, ``@thread_turn_predicate``,
``@case_predicate`` or ``@case_check``.
"""

from eval_pipeline.predicates.base import (
    CASE_CHECKS,
    PASS,
    PREDICATES,
    TURN_ERROR,
    CasePredicate,
    Predicate,
    TurnPredicate,
    TurnView,
    Verdict,
    case_check,
    case_predicate,
    get_turn_predicate,
    thread_turn_predicate,
    turn_predicate,
)
from eval_pipeline.predicates.explain import reason

__all__ = [
    "CASE_CHECKS",
    "PASS",
    "PREDICATES",
    "TURN_ERROR",
    "CasePredicate",
    "Predicate",
    "TurnPredicate",
    "TurnView",
    "Verdict",
    "case_check",
    "case_predicate",
    "get_turn_predicate",
    "reason",
    "thread_turn_predicate",
    "turn_predicate",
]
