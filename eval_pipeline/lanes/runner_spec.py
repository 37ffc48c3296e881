"""What a ``framework_runner`` lane's ``runner:`` block says: which upstream runner scores the
lane, how its case details become case rows, and which metrics the lane emits.

An upstream eval framework (one ``evals/<lane>/runner.py`` per lane, each exposing
``run_lane(cases, **kwargs)`` that returns a report with ``.metrics`` and ``.case_details``)
is run whole, in a child process of the checkout's own interpreter
(:mod:`eval_pipeline.frameworks`); this block is everything the lane kind
(:mod:`eval_pipeline.lanes.kinds.framework_runner`) reads of it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

FRAMEWORK_KIND = "framework_runner"
_NAME = r"^[a-z][a-z0-9_]*$"
_ROW = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"  # a detail field, nested ones dotted
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_MESSAGE_FIELDS = ("failure_reasons", "reason")


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaseRowSeverities(_Block):
    """Which case rows are ``hard`` (the case's contract); every other bool field is ``report``."""

    hard: list[str] = Field(default_factory=list, description="Detail fields (dotted when nested).")
    report: list[str] = Field(default_factory=list, description="Detail fields listed for the record.")

    @field_validator("hard", "report")
    @classmethod
    def _rows(cls, rows: list[str]) -> list[str]:
        for row in rows:
            if not re.match(_ROW, row):
                raise ValueError(f"case row {row!r} must be a detail field name (nested ones dotted)")
        return rows


class TurnList(_Block):
    """A detail field holding the case's turns (a list of objects): each item becomes a
    transcript turn, so the viewer shows the conversation."""

    field: str = Field(pattern=_ROW, description="The detail field holding the list of turns.")
    prompt: str = Field(default="prompt", description="The item field holding what was said to the system.")
    surface: str = Field(default="surface", description="The item field holding what it answered.")


class RunnerMetric(_Block):
    """One metric: ``rate_of`` a case row (recomputed from the rows: it has an interval and a
    paired regression check), or ``value`` of a metric the runner reported (passed through)."""

    rate_of: str | None = Field(default=None, pattern=_ROW, description="A case row: passes / applicable.")
    value: str | None = Field(
        default=None, pattern=_ROW, description="A metric of the runner's report (dotted when nested)."
    )
    where: dict[str, list[JsonValue]] = Field(
        default_factory=dict,
        description="rate_of only: count the cases whose field holds one of these values; their rows "
        "are kept under the metric's own name, so the paired check compares exactly them.",
    )

    @model_validator(mode="after")
    def _one(self) -> RunnerMetric:
        if (self.rate_of is None) == (self.value is None):
            raise ValueError("a runner metric is exactly one of rate_of, value")
        if self.where and self.rate_of is None:
            raise ValueError("where applies to a rate_of metric only")
        return self


class RunnerSpec(_Block):
    """The ``runner:`` block of a ``framework_runner`` lane."""

    checkout: str = Field(
        min_length=1,
        description="The framework checkout's folder: absolute, relative to the lane folder, or "
        "${ENV_VAR} (a variable naming it).",
    )
    lane: str = Field(
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", description="The upstream lane: evals/<lane>/runner.py."
    )
    name: str = Field(
        default="framework",
        pattern=r"^[a-z0-9][a-z0-9_-]{0,30}$",
        description="The checkout's short name: a run's runtime is <name>-<12 hex of its commit>.",
    )
    python: str | None = Field(
        default=None,
        description="The checkout's interpreter (relative to the checkout, or absolute, or ${ENV_VAR}); "
        "default: .venv/bin/python in the checkout.",
    )
    id_field: str = Field(
        default="id", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="The case field holding its id."
    )
    added_id: bool = Field(
        default=False,
        description="The id field was added to cases that had none (import-lanes does): it is removed "
        "before the runner sees a case.",
    )
    state_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="An environment variable the runner reads its engine-state folder from: a fresh "
        "empty folder is given each run.",
    )
    deadline_s: float = Field(
        default=3600.0, gt=0, le=86400, description="The runner is stopped after this long."
    )
    kwargs: dict[str, JsonValue] = Field(default_factory=dict, description="Keyword arguments of run_lane.")
    case_rows: CaseRowSeverities = Field(default_factory=CaseRowSeverities)
    pass_when: dict[str, list[JsonValue]] = Field(
        default_factory=dict,
        description="Detail fields that are not bool (an enum such as outcome): a row that passes when "
        "the field holds one of these values.",
    )
    messages: list[str] = Field(
        default_factory=lambda: list(DEFAULT_MESSAGE_FIELDS),
        description="Detail fields whose text is a failing row's message, first present wins.",
    )
    turns: TurnList | None = None
    ignore: list[str] = Field(
        default_factory=list, description="Bool detail fields that are not case rows (dotted when nested)."
    )
    metrics: dict[str, RunnerMetric] = Field(min_length=1)

    @field_validator("metrics")
    @classmethod
    def _metric_names(cls, metrics: dict[str, RunnerMetric]) -> dict[str, RunnerMetric]:
        for name in metrics:
            if not re.match(_NAME, name):
                raise ValueError(f"metric name {name!r} must match {_NAME}")
        return metrics

    @model_validator(mode="after")
    def _severities(self) -> RunnerSpec:
        both = set(self.case_rows.hard) & set(self.case_rows.report)
        if both:
            raise ValueError(f"case rows {sorted(both)} are listed both hard and report")
        return self

    def severity(self, row: str) -> Literal["hard", "report"]:
        return "hard" if row in self.case_rows.hard else "report"

    def checkout_path(self, lane_folder: Path) -> Path:
        """The checkout's folder (ValueError when a variable it names is not set)."""
        return _path(self.checkout, lane_folder, "runner.checkout")

    def interpreter(self, checkout: Path) -> Path:
        """The interpreter the runner runs with."""
        if self.python is None:
            return checkout / ".venv" / "bin" / "python"
        return _path(self.python, checkout, "runner.python")

    def runner_file(self, checkout: Path) -> Path:
        return checkout / "evals" / self.lane / "runner.py"


def _path(text: str, base: Path, field: str) -> Path:
    """``text`` with each ``${VAR}`` replaced by its value, relative to ``base`` when relative."""
    unset = [name for name in _ENV.findall(text) if not os.environ.get(name)]
    if unset:
        raise ValueError(f"{field} {text!r} names {', '.join(unset)}, which is not set")
    path = Path(_ENV.sub(lambda m: os.environ[m.group(1)], text)).expanduser()
    return path if path.is_absolute() else base / path
