"""What a run was asked to do, built once where it was asked (the command line, the launchpad's
run config, the schedule) and passed whole: the lane run's split, night and cases, the history
root, and how it drives its runtime (:class:`DriveSettings`, which the Dagster runtime resource
is made of, so the launchpad shows the same fields with the same bounds and words).

No Dagster here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core import MAX_CONCURRENCY, MAX_REPEAT
from eval_pipeline.runtimes.budget import Budget, check_priced
from eval_pipeline.runtimes.targets import RuntimeTarget


class DriveSettings(BaseModel):
    """How a run drives its runtime target; an empty setting means the target's own."""

    model_config = ConfigDict(frozen=True)

    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Sessions (cases) evaluated at once; empty means the target's setting, else the "
        "runtime's own preference (its worker count or request limit), else 1.",
    )
    repeat: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REPEAT,
        description="Samples per case, each in a fresh session; empty means the target's repeat, else the lane's.",
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        description="Run seed: sample i of a case is sent with a seed derived from (seed, case, i) to "
        "runtimes that take one; empty: no seed.",
    )
    resume: bool = Field(
        default=False,
        description="Answer the sessions the series' last interrupted run journaled from its journal and "
        "send only the rest (a re-execution of a failed run always does).",
    )
    max_cost: float | None = Field(
        default=None,
        ge=0.0,
        description="The most this run may spend (needs the target's price); empty: the target's budget.",
    )
    max_turns: int | None = Field(
        default=None, ge=1, description="The most turns this run may send; empty: the target's budget."
    )
    cache: bool | None = Field(
        default=None,
        description="Answer sessions asked before from the response cache; empty means the target's cache setting.",
    )

    def budget_for(self, target: RuntimeTarget) -> Budget:
        """This run's budget against ``target``: its own limits, else the target's ``budget:``;
        a cost limit for a target with no ``price:`` is refused (RuntimeSpecError). The one place
        a run's budget is decided: the command line asks before anything runs (bad input), the
        transcripts stage for the budget its ledger enforces (a launchpad run is refused there)."""
        budget = Budget(self.max_cost, self.max_turns).over(target.budget)
        check_priced(budget, target.name, target.price)
        return budget

    def caches(self, target: RuntimeTarget) -> bool:
        """Whether a run against ``target`` uses the response cache (its setting, else the target's)."""
        return target.cache if self.cache is None else self.cache

    def concurrency_for(self, target: RuntimeTarget) -> int | None:
        return self.concurrency or target.concurrency

    def samples_for(self, target: RuntimeTarget, lane_repeat: int) -> int:
        """Samples per case: this run's repeat, else the target's, else the lane's."""
        return self.repeat or target.samples_for(lane_repeat)


@dataclass(frozen=True)
class LaneRunRequest:
    """One lane run of a series: which split's rules (and, for a custom case file, which file),
    which night it belongs to, where history is (resolved once, by whoever built the request),
    how it drives its runtime, and how it runs (tags, log level, executor)."""

    split: str
    date: str
    history_root: str
    cases_path: str = ""
    drive: DriveSettings = field(default_factory=DriveSettings)
    tags: Mapping[str, str] = field(default_factory=dict)
    log_level: str = "INFO"
    executor: str = "in_process"  # or celery


@dataclass(frozen=True)
class RunRequest:
    """One ``eval-pipeline run`` invocation, as its command line asked: which lanes and splits,
    against which runtime, where history is (resolved once), how each lane run drives the
    runtime, and what to write besides the tables."""

    lanes: tuple[str, ...]  # empty: every lane
    split: str | None
    runtime: str | None  # a target name or a spec; None: the default runtime
    runtime_options: tuple[str, ...]
    cases: Path | None
    history_root: str
    history_given: bool  # --history was given (a history: target then reads it)
    date: str | None
    drive: DriveSettings
    executor: str | None  # in_process or celery; None: the environment's choice
    as_json: bool = False
    junit: Path | None = None
    summary_md: Path | None = None
    baseline: str | None = None
    notify: bool = False
    verbose: bool = False

    def for_lane(self, split: str, night: str, executor: str, tags: Mapping[str, str]) -> LaneRunRequest:
        """The request of one lane run of this invocation."""
        return LaneRunRequest(
            split=split,
            date=night,
            history_root=self.history_root,
            cases_path=str(self.cases) if self.cases else "",
            drive=self.drive,
            tags=dict(tags),
            log_level="DEBUG" if self.verbose else "CRITICAL",  # failures are reported once, after
            executor=executor,
        )
