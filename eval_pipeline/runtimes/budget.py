"""Budgets: how much a run may spend (``--max-cost``, ``--max-turns``, a target's ``budget:``).

A budget counts what *this* run sends: the turns of the sessions it completes, and their
``cost``. Sessions answered from the journal were paid for by an earlier run and cost nothing
now, so ``--resume`` with the same budget may spend it again. Once a budget is reached no
new session starts; the sessions in flight finish (so a run stops within one session per
concurrency slot of its budget), their answers go to the journal, and the run is void
(:class:`BudgetReached`, exit 4) saying what it spent and how far it got; ``--resume``
continues it.

Cost is what a turn's row says (its ``cost``; null: not known). A cost budget needs a price
to count from, so ``--max-cost`` on a target without one is refused before anything runs;
an answered turn whose cost is still unknown (the runtime did not report its usage) stops
the run as a reached budget would: a cost budget that cannot be counted is never kept by
guessing. A turn that faulted with no cost is counted as costing nothing.

Rejected: *counting per turn as answers arrive* (a session in flight finishes whatever it
has cost, so counting its turns earlier stops nothing sooner); *a budget across resumed
runs* (``--resume`` after a reached budget would stop at once unless the budget is raised).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline.runtimes.base import RuntimeSpecError

RowCost = Callable[[Mapping[str, Any]], float | None]


def row_cost(row: Mapping[str, Any]) -> float | None:
    """What a transcript row cost this run (None: not known): its ``cost``, or nothing when the
    response cache answered it (its ``cost`` is what the answer cost when it was bought)."""
    if row.get("cached"):
        return 0.0
    cost = row.get("cost")
    return None if cost is None else float(cost)


@dataclass(frozen=True)
class Budget:
    """The most a run may spend; None: no limit of that kind."""

    max_cost: float | None = None
    max_turns: int | None = None

    def __post_init__(self) -> None:
        if self.max_cost is not None and not (math.isfinite(self.max_cost) and self.max_cost >= 0):
            raise ValueError(f"max_cost must be a finite amount >= 0, got {self.max_cost!r}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns!r}")

    @property
    def limited(self) -> bool:
        return self.max_cost is not None or self.max_turns is not None

    def over(self, other: Budget) -> Budget:
        """This budget where it sets a limit, else ``other``'s (the command line over the target)."""
        return Budget(
            self.max_cost if self.max_cost is not None else other.max_cost,
            self.max_turns if self.max_turns is not None else other.max_turns,
        )


def check_priced(budget: Budget, target_name: str, price: object | None) -> None:
    """Refuse a cost budget for a target that has no ``price:`` to count cost from."""
    if budget.max_cost is not None and price is None:
        raise RuntimeSpecError(
            f"--max-cost: runtime target {target_name!r} has no price: in evals/runtimes.yaml, so the "
            "cost of its turns is not known; declare its price, or limit the run with --max-turns"
        )


class BudgetReached(Exception):
    """A run stopped at its budget: it is void, its answered sessions are in the journal."""


class BudgetMeter:
    """Counts what a run's completed sessions spent and says whether another may start (thread-safe)."""

    def __init__(self, budget: Budget, cost_of: RowCost = row_cost) -> None:
        self.budget = budget
        self._cost_of = cost_of
        self._lock = threading.Lock()
        self.turns = 0
        self.cost = 0.0
        self.unknown_cost_turns = 0
        self.sessions = 0
        self.not_started = 0

    def add(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Count one completed session's rows."""
        with self._lock:
            self.sessions += 1
            self.turns += sum(not row.get("cached") for row in rows)  # the cache sends nothing
            for row in rows:
                cost = self._cost_of(row)
                if cost is not None:
                    self.cost += cost
                elif row.get("error") is None:
                    self.unknown_cost_turns += 1

    @property
    def reason(self) -> str | None:
        """Why no new session may start (None: the budget allows one)."""
        budget = self.budget
        if budget.max_turns is not None and self.turns >= budget.max_turns:
            return f"--max-turns {budget.max_turns:,} reached: {self.turns:,} turns sent"
        if budget.max_cost is not None:
            if self.unknown_cost_turns:
                return (
                    f"--max-cost {budget.max_cost:g}: {self.unknown_cost_turns:,} answered turn(s) of unknown "
                    "cost (the runtime did not report usage), so the budget cannot be counted"
                )
            if self.cost >= budget.max_cost:
                return f"--max-cost {budget.max_cost:g} reached: {self.cost:.6g} spent"
        return None

    def may_start(self) -> bool:
        """Whether a new session may start; a refusal is counted (a session not started)."""
        with self._lock:
            if self.reason is None:
                return True
            self.not_started += 1
            return False

    @property
    def stopped(self) -> bool:
        return self.not_started > 0

    def summary(self, answered_sessions: int, total_sessions: int) -> str:
        """What the run spent and how far it got, for a run the budget stopped."""
        cost = ""
        if self.budget.max_cost is not None or self.cost:
            cost = f", cost {self.cost:.6g}" + (
                f" (+ {self.unknown_cost_turns:,} turn(s) of unknown cost)" if self.unknown_cost_turns else ""
            )
        return (
            f"budget reached ({self.reason}); this run sent {self.sessions:,} session(s), "
            f"{self.turns:,} turn(s){cost}; {answered_sessions:,} of {total_sessions:,} sessions answered, "
            f"{self.not_started:,} not started. The run is void; run it again with --resume to continue"
        )
