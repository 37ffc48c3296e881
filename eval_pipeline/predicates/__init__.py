"""Pure predicate functions, by family, and the registry that finds them by name."""

from eval_pipeline.predicates import status, surface, thread
from eval_pipeline.predicates.base import (
    PASS,
    TURN_ERROR,
    TurnPredicate,
    TurnView,
    Verdict,
    get_turn_predicate,
    turn_predicate,
    turn_predicate_names,
)

__all__ = [
    "PASS",
    "TURN_ERROR",
    "TurnPredicate",
    "TurnView",
    "Verdict",
    "get_turn_predicate",
    "status",
    "surface",
    "thread",
    "turn_predicate",
    "turn_predicate_names",
]
