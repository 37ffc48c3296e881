"""Budgets through the real driver: a run stops starting sessions at its budget (within one
session per concurrency slot), its answered sessions are journaled, and resuming sends only
the rest. Cost is what each turn's row carries, filled here from a runtime that says it."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Books, Sending, drive
from eval_pipeline.run.journal import JournalIdentity, read_journal
from eval_pipeline.run.ledger import Journaling, open_ledger
from eval_pipeline.run.request import DriveSettings
from eval_pipeline.runtimes.base import Capabilities, RuntimeSpecError, TurnResponse
from eval_pipeline.runtimes.budget import Budget, BudgetMeter, BudgetReached, check_priced
from eval_pipeline.runtimes.targets import TargetsFileError, load_targets, resolve_target

TURN_COST = 0.25
TURNS = 3
IDENTITY = JournalIdentity("lane_a", "dev", "dev", "c" * 64, "priced", "v1", 1, None)


class PricedRuntime:
    """A runtime that says what each answer cost, and counts what it was sent."""

    spec = "test:priced"
    capabilities = Capabilities()

    def __init__(self, cost: float | None = TURN_COST) -> None:
        self.cost = cost
        self.sent = 0
        self._lock = threading.Lock()

    def open_session(self, session_id: str) -> PricedSession:
        return PricedSession(self, session_id)

    def close(self) -> None:
        pass


class PricedSession:
    def __init__(self, runtime: PricedRuntime, session_id: str) -> None:
        self.runtime, self.session_id = runtime, session_id

    def send(self, prompt: str) -> TurnResponse:
        with self.runtime._lock:
            self.runtime.sent += 1
        raw = {} if self.runtime.cost is None else {"cost": self.runtime.cost}
        return TurnResponse(surface=f"{self.session_id}: {prompt}", raw=raw)

    def close(self) -> None:
        pass


def cost_in_raw(row: Mapping[str, Any]) -> float | None:
    """The test runtime's cost, carried in the row's raw JSON."""
    cost = json.loads(row["raw"]).get("cost") if row.get("raw") else None
    return None if cost is None else float(cost)


def threads(count: int) -> list[Thread]:
    turns = tuple(TurnRequest(turn_index=i, role="turn", prompt=f"prompt {i}") for i in range(TURNS))
    return [Thread(case_id=f"case_{i:03d}", turns=turns) for i in range(count)]


def test_a_cost_budget_stops_within_one_session_per_slot_and_resume_finishes(tmp_path: Path) -> None:
    runtime = PricedRuntime()
    sessions, concurrency, max_cost = 60, 4, 5.0
    ledger = open_ledger(
        Journaling(tmp_path, "run-1"),
        IDENTITY,
        Budget(max_cost=max_cost),
        lambda _: None,
        cost_of=cost_in_raw,
    )
    try:
        stopped = drive(
            runtime, threads(sessions), Sending(concurrency=concurrency), books=Books(ledger=ledger)
        )
    finally:
        ledger.close()
    assert ledger.meter is not None
    session_cost = TURNS * TURN_COST
    spent = ledger.meter.cost
    assert spent == runtime.sent * TURN_COST == len(stopped) * TURN_COST
    assert max_cost <= spent <= max_cost + concurrency * session_cost
    assert ledger.meter.not_started == sessions - len(stopped) // TURNS > 0
    with pytest.raises(BudgetReached, match=r"--max-cost 5 reached.*of 60 sessions answered.*--resume"):
        ledger.raise_if_stopped()
    journaled = read_journal(tmp_path / "lane_a" / "dev" / "priced" / "run-1.journal").sessions
    assert len(journaled) == len(stopped) // TURNS

    resumed = open_ledger(Journaling(tmp_path, "run-2", resume=True), IDENTITY, Budget(), lambda _: None)
    before = runtime.sent
    try:
        whole = drive(
            runtime, threads(sessions), Sending(concurrency=concurrency), books=Books(ledger=resumed)
        )
    finally:
        resumed.close()
    assert runtime.sent - before == (sessions - len(journaled)) * TURNS
    assert resumed.note == f"resumed: {len(journaled)} of {sessions} sessions from the journal"
    assert len(whole) == sessions * TURNS
    resumed.raise_if_stopped()  # no budget: nothing stops it


def test_a_turn_budget_counts_turns_sent() -> None:
    meter = BudgetMeter(Budget(max_turns=6))
    meter.add([{"error": None}] * 3)
    assert meter.may_start()
    meter.add([{"error": "TimeoutError: x"}] * 3)  # a faulted turn was sent too
    assert not meter.may_start() and meter.reason == "--max-turns 6 reached: 6 turns sent"


def test_answered_turns_of_unknown_cost_stop_a_cost_budget() -> None:
    meter = BudgetMeter(Budget(max_cost=100.0))
    meter.add([{"error": "ConnectionError: refused", "cost": None}])  # no answer: nothing billed
    assert meter.may_start()
    meter.add([{"error": None}])  # answered, cost not known
    assert not meter.may_start()
    assert meter.reason is not None and "1 answered turn(s) of unknown cost" in meter.reason


def test_a_cost_budget_needs_a_price() -> None:
    with pytest.raises(RuntimeSpecError, match=r"'reference' has no price:.*--max-turns"):
        check_priced(Budget(max_cost=1.0), "reference", None)
    check_priced(Budget(max_turns=10), "reference", None)
    check_priced(Budget(max_cost=1.0), "priced", {"input": 1.0, "output": 2.0})


def test_a_runs_budget_is_decided_once_with_its_price_check(tmp_path: Path) -> None:
    """``DriveSettings.budget_for`` is what the command line and the transcripts stage both ask:
    the run's limits over the target's, a cost limit refused for a target without a price (a
    target's own cost budget too)."""
    path = tmp_path / "runtimes.yaml"
    path.write_text(
        "targets:\n"
        "  unpriced: {spec: reference}\n"
        "  priced: {spec: reference, price: {input: 1.0, output: 2.0}, budget: {max_turns: 50}}\n"
        "  capped_unpriced: {spec: reference, budget: {max_cost: 2.0}}\n",
        encoding="utf-8",
    )
    targets = load_targets(path)
    unpriced, priced = resolve_target("unpriced", {}, targets), resolve_target("priced", {}, targets)
    with pytest.raises(RuntimeSpecError, match=r"'unpriced' has no price:.*--max-turns"):
        DriveSettings(max_cost=1.0).budget_for(unpriced)
    with pytest.raises(RuntimeSpecError, match=r"'capped_unpriced' has no price:"):
        DriveSettings().budget_for(resolve_target("capped_unpriced", {}, targets))
    assert DriveSettings(max_turns=10).budget_for(unpriced) == Budget(max_turns=10)
    assert DriveSettings(max_cost=1.0).budget_for(priced) == Budget(max_cost=1.0, max_turns=50)


def test_the_command_lines_budget_wins_over_the_targets() -> None:
    target = Budget(max_cost=9.0, max_turns=900)
    assert Budget(max_turns=10).over(target) == Budget(max_cost=9.0, max_turns=10)
    assert Budget().over(target) == target
    with pytest.raises(ValueError, match="max_cost"):
        Budget(max_cost=float("nan"))


def test_a_targets_budget_is_read_from_runtimes_yaml_and_checked_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "runtimes.yaml"
    path.write_text(
        "targets:\n"
        "  capped:\n"
        "    spec: reference\n"
        "    budget: {max_turns: 500}\n"
        "  uncapped: {spec: 'reference:no-gloss'}\n",
        encoding="utf-8",
    )
    targets = load_targets(path)
    assert targets["capped"].budget == Budget(max_turns=500)
    assert targets["uncapped"].budget == Budget()
    assert resolve_target("capped", {"pack": "x.json"}, targets).budget == Budget(max_turns=500)

    path.write_text(
        "targets:\n"
        "  capped:\n"
        "    spec: reference\n"
        "    budget:\n"
        "      max_turns: 0\n"
        "      max_cost: .nan\n"
        "      max_spend: 3\n",
        encoding="utf-8",
    )
    with pytest.raises(TargetsFileError) as caught:
        load_targets(path)
    problems = [str(problem) for problem in caught.value.problems]
    assert any(
        ":5: targets.capped.budget.max_turns:" in p and "greater than or equal to 1" in p for p in problems
    )
    assert any(":6: targets.capped.budget.max_cost:" in p for p in problems)
    assert any(":7: targets.capped.budget.max_spend:" in p and "not permitted" in p for p in problems), (
        problems
    )
