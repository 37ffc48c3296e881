"""Discover the lanes under the evals folder, and find what scores each one."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.cases import CaseFileError, CaseProblem
from eval_pipeline.cases.strict_yaml import YamlDocument, location
from eval_pipeline.core import EVALS_ENV, NoProjectError, evals_dir
from eval_pipeline.lanes.declared import DeclaredLane
from eval_pipeline.lanes.kind import LANE_KINDS, LaneKind, emitted_metrics
from eval_pipeline.lanes.kinds.framework_runner import FrameworkRunnerLane
from eval_pipeline.lanes.spec import LaneSpec, lane_file, load_lane_document
from eval_pipeline.lanes.validation import declaration_problems


def lane_kind(spec: LaneSpec) -> LaneKind:
    """What scores ``spec``: its declaration, or the kind module it names."""
    if spec.kind is None:
        return DeclaredLane(spec)
    if spec.runner is not None:  # its metrics and rows are its runner block's
        return FrameworkRunnerLane(spec)
    return LANE_KINDS.get(spec.kind)()


def discover_lanes(root: Path | None = None) -> list[LaneSpec]:
    """Every lane folder under ``root`` (default: the evals folder), sorted by lane name.

    A folder counts as a lane when it holds ``lane.yaml`` or ``manifest.yaml``. Two lanes
    with one name, a lane naming an unknown kind, or a declaration naming an unknown
    predicate, field or metric is an error that names the file.
    """
    root = root or evals_dir()
    if not root.is_dir():
        raise FileNotFoundError(
            f"lanes folder {root} does not exist: `lanes` in the project's [tool.eval-pipeline] "
            f"(pyproject.toml), or {EVALS_ENV}, names the folder holding the lanes"
        )
    specs: list[LaneSpec] = []
    problems: list[CaseProblem] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        path = lane_file(folder)
        if path is None:
            continue
        spec, document = load_lane_document(path)
        problems.extend(_lane_problems(spec, document))
        if any(s.name == spec.name for s in specs):
            problems.append(document.problem(("name",), f"lane name {spec.name!r} used by two folders"))
        specs.append(spec)
    if problems:
        raise CaseFileError(problems)
    return sorted(specs, key=lambda s: s.name)


def _lane_problems(spec: LaneSpec, document: YamlDocument) -> list[CaseProblem]:
    """What is wrong with a lane beyond its file's types, each at its field's line."""
    # The contract is the lane in words: what its asset group shows and what a reader opens.
    missing = (
        []
        if (spec.folder / spec.contract).is_file()
        else [document.problem(("contract",), f"{spec.contract!r} does not exist in the lane folder")]
    )
    return missing + _scoring_problems(spec, document)


def _scoring_problems(spec: LaneSpec, document: YamlDocument) -> list[CaseProblem]:
    if spec.kind is not None and spec.kind not in LANE_KINDS:
        return [document.problem(("kind",), f"unknown lane kind {spec.kind!r}; known: {LANE_KINDS.names()}")]
    if spec.kind is None:
        declared = declaration_problems(spec)
        if declared:
            return [document.problem(location(field), message) for field, message in declared]
    emitted = emitted_metrics(lane_kind(spec))
    return [
        document.problem(
            ("thresholds", i, "metric"),
            f"{t.metric!r} is not a metric of lane {spec.name!r}; it emits {sorted(emitted)}",
        )
        for i, t in enumerate(spec.thresholds)
        if t.metric not in emitted
    ]


def find_lane(name: str, root: Path | None = None) -> LaneSpec:
    lanes = discover_lanes(root)
    for spec in lanes:
        if spec.name == name:
            return spec
    raise KeyError(f"no lane named {name!r}; lanes: {[s.name for s in lanes]}")


def declared_lane(name: str, root: Path | None = None) -> LaneSpec | None:
    """The lane as this project declares it, or None (history may hold lanes no longer here,
    or be read where there is no lanes folder, or no project): what reads history for a lane's
    rates asks this."""
    try:
        return find_lane(name, root)
    except (KeyError, FileNotFoundError, NoProjectError):
        return None
