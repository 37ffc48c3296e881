"""The lane spec: what ``evals/<lane>/lane.yaml`` (or ``manifest.yaml``) declares.

A lane folder names its kind (the code that scores it), its splits and their case files,
and its thresholds. Thresholds become Dagster asset checks: ``ERROR`` ones block (a pinned
floor), ``WARN`` ones report (a lift target or a red-on-creation goal).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from eval_pipeline.cases.loading import CaseFileError, CaseProblem
from eval_pipeline.scoring import Severity, ThresholdOp

LANE_FILES: tuple[str, ...] = ("lane.yaml", "manifest.yaml")
_NAME = r"^[a-z][a-z0-9_]*$"


class ThresholdSpec(BaseModel):
    """One metric bound, checked after every run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(pattern=_NAME)
    op: ThresholdOp
    value: float
    severity: Severity
    reason: str = Field(min_length=1, description="Why this bound: cite the contract.")

    @property
    def check_name(self) -> str:
        return self.metric

    def describe(self) -> str:
        return f"{self.metric} {self.op} {self.value:g} ({self.severity})"


class LaneSpec(BaseModel):
    """A lane as declared in its folder. ``folder`` is filled in by the loader."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME, description="Dagster key prefix and group name.")
    kind: str = Field(pattern=_NAME, description="Registered lane kind that scores these cases.")
    version: str
    title: str
    description: str = ""
    contract: str = "contract.md"
    case_schema_version: int | None = None
    splits: dict[str, list[str]] = Field(min_length=1)
    nightly_splits: list[str] = Field(min_length=1)
    locked_splits: list[str] = Field(
        default_factory=list,
        description="Splits whose cases must never reach prompt-composition code.",
    )
    thresholds: list[ThresholdSpec] = Field(default_factory=list)
    folder: Path = Path(".")

    @field_validator("splits")
    @classmethod
    def _split_names(cls, splits: dict[str, list[str]]) -> dict[str, list[str]]:
        import re

        for split, files in splits.items():
            if not re.match(_NAME, split):
                raise ValueError(f"split name {split!r} must match {_NAME}")
            if not files:
                raise ValueError(f"split {split!r} lists no case files")
        return splits

    @model_validator(mode="after")
    def _consistent(self) -> LaneSpec:
        for split in [*self.nightly_splits, *self.locked_splits]:
            if split not in self.splits:
                raise ValueError(f"split {split!r} is not one of the lane's splits {sorted(self.splits)}")
        seen: set[str] = set()
        for threshold in self.thresholds:
            if threshold.metric in seen:
                raise ValueError(f"metric {threshold.metric!r} has more than one threshold")
            seen.add(threshold.metric)
        return self

    @property
    def effective_thresholds(self) -> list[ThresholdSpec]:
        """The lane's thresholds plus the defaults every lane gets unless it sets its own."""
        own = {t.metric for t in self.thresholds}
        return [*self.thresholds, *(t for t in DEFAULT_THRESHOLDS if t.metric not in own)]

    def case_files(self, split: str) -> list[Path]:
        if split not in self.splits:
            raise KeyError(f"lane {self.name!r} has no split {split!r}; it has {sorted(self.splits)}")
        return [self.folder / rel for rel in self.splits[split]]

    def contract_text(self) -> str:
        path = self.folder / self.contract
        return path.read_text(encoding="utf-8") if path.exists() else ""


DEFAULT_THRESHOLDS: tuple[ThresholdSpec, ...] = (
    ThresholdSpec(
        metric="error_rate",
        op="==",
        value=0.0,
        severity="WARN",
        reason="Runtime faults are recorded per turn; any fault is worth a look, not a gate.",
    ),
)


def load_lane_spec(path: Path) -> LaneSpec:
    """Read and validate one lane file; problems are reported like case-file problems."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise CaseFileError([CaseProblem(str(path), line, "(yaml)", f"not valid YAML: {exc}")]) from exc
    if not isinstance(data, dict):
        raise CaseFileError([CaseProblem(str(path), 1, "(file)", "expected a mapping at the top level")])
    try:
        return LaneSpec.model_validate({**data, "folder": path.parent})
    except ValidationError as exc:
        raise CaseFileError(
            [
                CaseProblem(str(path), 0, ".".join(str(p) for p in err["loc"]) or "(file)", err["msg"])
                for err in exc.errors()
            ]
        ) from exc


def lane_file(folder: Path) -> Path | None:
    for name in LANE_FILES:
        if (folder / name).is_file():
            return folder / name
    return None
