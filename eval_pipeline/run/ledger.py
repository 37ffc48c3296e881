"""A run's ledger: the journal it appends to and resumes from, and the budget it spends.

:class:`RunLedger` is the :class:`eval_pipeline.run.drive.SessionLedger` the transcripts stage
hands the driver: a session the resumed journal holds (and whose turns are this run's turns)
is answered from it, a session the budget no longer allows is not started, and every session
sent is journaled and counted.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from logging import Logger
from pathlib import Path
from typing import Any

from eval_pipeline.lanes import Thread
from eval_pipeline.run.drive import recording_of
from eval_pipeline.run.journal import (
    CorruptRecord,
    JournalIdentity,
    OpenedJournal,
    nothing_committed,
    open_journal,
    session_turns,
)
from eval_pipeline.runtimes.base import ChatRuntime, RuntimeSpecError
from eval_pipeline.runtimes.budget import Budget, BudgetMeter, BudgetReached, RowCost, row_cost
from eval_pipeline.runtimes.targets import RuntimeTarget
from eval_pipeline.runtimes.versions import runtime_version
from eval_pipeline.tables import StageFile, column_values

Warn = Callable[[str], None]


def cases_sha256(cases: StageFile, lane: str, lane_version: str) -> str:
    """The digest of a cases stage (every case's id and JSON, in order) and the lane version
    that turns them into threads."""
    digest = hashlib.sha256(f"{lane}\0{lane_version}\0".encode())
    for batch in cases.batches(["case_id", "case_json"]):
        for case_id, case_json in zip(
            column_values(batch, "case_id"), column_values(batch, "case_json"), strict=True
        ):
            digest.update(f"{case_id}\0{case_json}\0".encode())
    return digest.hexdigest()


class RunLedger:
    """The journal and budget of one run's transcripts stage (thread-safe)."""

    def __init__(self, journal: OpenedJournal, meter: BudgetMeter | None, warn: Warn) -> None:
        self.journal = journal
        self.meter = meter
        self._warn = warn
        self._lock = threading.Lock()
        self.sessions = 0
        self.resumed = 0
        self.warnings: list[str] = []
        for warning in journal.warnings:
            self._warning(warning)

    def _warning(self, text: str) -> None:
        with self._lock:
            self.warnings.append(text)
        self._warn(text)

    def answered(self, key: str, sample_index: int, threads: Sequence[Thread]) -> list[dict[str, Any]] | None:
        with self._lock:
            self.sessions += 1
        try:
            rows = self.journal.answered.pop((key, sample_index))
        except (CorruptRecord, OSError) as exc:
            self._warning(
                f"{self.journal.writer.path}: session {key!r} (sample {sample_index}) no longer reads back "
                f"({exc}): skipped, the session is sent again"
            )
            return None
        if rows is None:
            return None
        expected = [(t.case_id, turn.turn_index, turn.prompt) for t in threads for turn in t.turns]
        if session_turns(rows) != expected or any(row.get("sample_index") != sample_index for row in rows):
            self._warning(
                f"{self.journal.writer.path}: session {key!r} (sample {sample_index}) holds other turns "
                "than this run sends: skipped, the session is sent again"
            )
            return None
        with self._lock:
            self.resumed += 1
        return rows

    def may_start(self) -> bool:
        return self.meter is None or self.meter.may_start()

    def completed(self, key: str, sample_index: int, rows: list[dict[str, Any]]) -> None:
        self.journal.writer.append_session(key, sample_index, rows)
        if self.meter is not None:
            self.meter.add(rows)

    def raise_if_stopped(self) -> None:
        """BudgetReached when the budget left sessions unsent (the run is void)."""
        if self.meter is not None and self.meter.stopped:
            answered = self.resumed + self.meter.sessions
            raise BudgetReached(self.meter.summary(answered, self.sessions))

    @property
    def note(self) -> str:
        """What the run says about its journal, a line each: the entries it skipped, then how
        much it resumed, or that it started afresh."""
        lines = list(self.warnings)
        if self.journal.note:
            lines.append(self.journal.note)
        elif self.journal.resumed_from is not None:
            lines.append(f"resumed: {self.resumed:,} of {self.sessions:,} sessions from the journal")
        return "\n".join(lines)

    def close(self) -> None:
        self.journal.writer.close()


@dataclass(frozen=True)
class Journaling:
    """Where run ``run_id`` journals (``root``) and what it takes over: with ``resume``, the
    series' last journal (a re-execution names the run it re-executes, ``parent_run_id``),
    unless ``is_committed`` says history already holds that run
    (:func:`eval_pipeline.run.journal.open_journal`)."""

    root: Path
    run_id: str
    resume: bool = False
    parent_run_id: str | None = None
    is_committed: Callable[[str], bool] = nothing_committed


def open_ledger(
    journaling: Journaling, identity: JournalIdentity, budget: Budget, warn: Warn, cost_of: RowCost = row_cost
) -> RunLedger:
    """The ledger of run ``journaling.run_id``: its journal (taken over from the series' last one
    when ``journaling`` says so, see :func:`eval_pipeline.run.journal.open_journal`) and its
    budget's meter."""
    journal = open_journal(
        journaling.root,
        identity,
        journaling.run_id,
        resume=journaling.resume,
        parent_run_id=journaling.parent_run_id,
        is_committed=journaling.is_committed,
    )
    return RunLedger(journal, BudgetMeter(budget, cost_of) if budget.limited else None, warn)


def transcripts_ledger(
    runtime: ChatRuntime,
    target: RuntimeTarget,
    identity: JournalIdentity,
    journaling: Journaling,
    budget: Budget,
    log: Logger,
) -> RunLedger | None:
    """The ledger of a transcripts step driving ``runtime`` for ``identity``, or None for a
    recording, which is sent nothing, so keeps no journal and spends no budget. Its runtime
    version is the identity's when it carries one (the step's response cache told it moments
    before, so an ``openai:`` server is asked ``GET /models`` once), else told now.
    ``journaling.is_committed`` says whether history holds a run id (a journal of one is never
    resumed)."""
    if recording_of(runtime) is not None:
        if journaling.resume or budget.limited:
            log.info("a recording is sent nothing: it keeps no journal and spends no budget")
        return None
    version = identity.runtime_version or known_runtime_version(target.spec, target.options)
    return open_ledger(journaling, replace(identity, runtime_version=version), budget, log.warning)


def known_runtime_version(spec: str, options: Mapping[str, Any]) -> str | None:
    """The digest of the runtime's version now, or None when it cannot be told (a server down)."""
    try:
        return runtime_version(spec, options).digest
    except RuntimeSpecError:
        return None
