"""The lane spec: what ``evals/<lane>/lane.yaml`` (or ``manifest.yaml``) declares.

A lane folder names its splits and their case files, and its thresholds. How it scores is
either declared in the same file (``case_schema``, ``threads``, ``turn_predicates``,
``case_predicates``, ``metrics``: see :mod:`eval_pipeline.lanes.declaration`) or, for a lane
the declaration cannot say, a ``kind``: a code module under ``eval_pipeline/lanes/kinds``.
Thresholds become Dagster asset checks: ``ERROR`` ones block (a pinned floor), ``WARN``
ones report (a lift target or a red-on-creation goal).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from eval_pipeline.cases import CaseFileError, CaseProblem
from eval_pipeline.cases.strict_yaml import YamlDocument, read_yaml_file
from eval_pipeline.core import MAX_REPEAT
from eval_pipeline.lanes.declaration import CaseRule, CaseSchema, Declaration, MetricSpec, Threads, TurnRule
from eval_pipeline.lanes.runner_spec import FRAMEWORK_KIND, RunnerSpec
from eval_pipeline.metrics import ALPHA, DEFAULT_MAX_ERROR_RATE, Severity, Statistic, ThresholdOp

LANE_FILES: tuple[str, ...] = ("lane.yaml", "manifest.yaml")
_NAME = r"^[a-z][a-z0-9_]*$"


class ThresholdSpec(BaseModel):
    """One metric bound, checked after every run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(pattern=_NAME)
    op: ThresholdOp
    value: float = Field(allow_inf_nan=False)
    severity: Severity
    reason: str = Field(min_length=1, description="Why this bound: cite the contract.")
    statistic: Statistic | None = Field(
        default=None,
        description="What the bound gates: mean, lower_bound, upper_bound or pass_hat_k. Default: the "
        "value with one sample per case; with N > 1 the 95% interval's end on the guarded side.",
    )

    @property
    def check_name(self) -> str:
        return self.metric

    def describe(self) -> str:
        return f"{self.metric} {self.op} {self.value:g} ({self.severity})"


class LaneSpec(BaseModel):
    """A lane as declared in its folder. ``folder`` is filled in by the loader."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME, description="Dagster key prefix and group name.")
    kind: str | None = Field(
        default=None, pattern=_NAME, description="A lane kind module, for a lane its declaration cannot say."
    )
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
    max_error_rate: float = Field(
        default=DEFAULT_MAX_ERROR_RATE,
        ge=0.0,
        le=1.0,
        description="Above this share of faulted turns a run is void: the runtime was not measured.",
    )
    regression_alpha: float = Field(
        default=ALPHA,
        gt=0.0,
        lt=1.0,
        description="The no_regression check's significance level: a rate regressed when the one-sided "
        "paired test against the series' previous run is below it (compare reads the same level).",
    )
    repeat: int = Field(
        default=1, ge=1, le=MAX_REPEAT, description="Samples per case (each in a fresh session) by default."
    )
    case_schema: CaseSchema | None = None
    threads: Threads | None = None
    turn_predicates: list[TurnRule] = Field(default_factory=list)
    case_predicates: list[CaseRule] = Field(default_factory=list)
    metrics: dict[str, MetricSpec] | None = Field(default=None, min_length=1)
    runner: RunnerSpec | None = Field(
        default=None, description=f"The upstream runner that scores a {FRAMEWORK_KIND!r} lane."
    )
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
            for file in files:
                if not _relative_inside(file):
                    raise ValueError(
                        f"split {split!r} lists {file!r}: case files are relative paths inside the lane folder"
                    )
        return splits

    @field_validator("contract")
    @classmethod
    def _contract_inside(cls, contract: str) -> str:
        if not _relative_inside(contract):
            raise ValueError(f"{contract!r}: the contract is a relative path inside the lane folder")
        return contract

    def outside_paths(self) -> list[tuple[tuple[str | int, ...], str]]:
        """(field, path) of every file the lane names that resolves outside its folder (a
        symbolic link pointing out of it): a lane may read its own folder only."""
        folder = self.folder.resolve()
        named: list[tuple[tuple[str | int, ...], str]] = [(("contract",), self.contract)]
        named += [
            (("splits", split, i), file)
            for split, files in self.splits.items()
            for i, file in enumerate(files)
        ]
        return [
            (loc, file) for loc, file in named if not (self.folder / file).resolve().is_relative_to(folder)
        ]

    @model_validator(mode="after")
    def _consistent(self) -> LaneSpec:
        declared = self.case_schema is not None or self.threads is not None or self.metrics is not None
        if self.kind is not None and declared:
            raise ValueError("a lane names a kind or declares case_schema/threads/metrics, not both")
        if self.kind is None and (self.case_schema is None or self.threads is None or self.metrics is None):
            raise ValueError("a declared lane needs case_schema, threads and metrics (or name a kind)")
        if (self.runner is not None) != (self.kind == FRAMEWORK_KIND):
            raise ValueError(f"a lane of kind {FRAMEWORK_KIND!r} names a runner, and only such a lane does")
        if self.runner is not None and self.repeat != 1:
            raise ValueError("a framework runner runs each case once: repeat must be 1")
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
    def declaration(self) -> Declaration | None:
        """The lane's scoring declaration, or None for a lane scored by a kind module."""
        if self.case_schema is None or self.threads is None or self.metrics is None:
            return None
        return Declaration(
            case_schema=self.case_schema,
            threads=self.threads,
            turn_predicates=self.turn_predicates,
            case_predicates=self.case_predicates,
            metrics=self.metrics,
        )

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


def _relative_inside(file: str) -> bool:
    """Whether ``file`` is written as a relative path that stays inside the folder it is relative to."""
    path = PurePosixPath(file)
    return bool(file.strip()) and not path.is_absolute() and ".." not in path.parts and "\\" not in file


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
    """Read and validate one lane file; problems are reported like case-file problems (file:line: field)."""
    return load_lane_document(path)[0]


def load_lane_document(path: Path) -> tuple[LaneSpec, YamlDocument]:
    """:func:`load_lane_spec`, with the file's document (the line of every field) for later checks."""
    document = read_yaml_file(path, CaseFileError)
    if document.key_problems:
        raise CaseFileError(document.key_problems)
    if not isinstance(document.data, dict):
        raise CaseFileError([CaseProblem(str(path), 1, "(file)", "expected a mapping at the top level")])
    try:
        spec = LaneSpec.model_validate({**document.data, "folder": path.parent}, strict=True)
    except ValidationError as exc:
        raise CaseFileError([document.problem(err["loc"], err["msg"]) for err in exc.errors()]) from None
    outside = spec.outside_paths()
    if outside:
        raise CaseFileError(
            [document.problem(loc, f"{file!r} leads outside the lane folder") for loc, file in outside]
        )
    return spec, document


def lane_file(folder: Path) -> Path | None:
    for name in LANE_FILES:
        if (folder / name).is_file():
            return folder / name
    return None
