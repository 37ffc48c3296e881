"""Discover the lanes under the evals folder."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.cases.loading import CaseFileError, CaseProblem
from eval_pipeline.lanes.kind import emitted_metrics, known_kinds, lane_kind
from eval_pipeline.lanes.spec import LaneSpec, lane_file, load_lane_spec
from eval_pipeline.settings import evals_dir


def discover_lanes(root: Path | None = None) -> list[LaneSpec]:
    """Every lane folder under ``root`` (default: the evals folder), sorted by lane name.

    A folder counts as a lane when it holds ``lane.yaml`` or ``manifest.yaml``. Two lanes
    with one name, or a lane naming an unknown kind, is an error that names the file.
    """
    root = root or evals_dir()
    if not root.is_dir():
        raise FileNotFoundError(
            f"evals folder {root} does not exist; set EVAL_PIPELINE_EVALS to the folder holding the lanes"
        )
    specs: list[LaneSpec] = []
    problems: list[CaseProblem] = []
    kinds = known_kinds()
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        path = lane_file(folder)
        if path is None:
            continue
        spec = load_lane_spec(path)
        if spec.kind not in kinds:
            problems.append(
                CaseProblem(str(path), 0, "kind", f"unknown lane kind {spec.kind!r}; known: {kinds}")
            )
        else:
            emitted = emitted_metrics(lane_kind(spec.kind))
            problems.extend(
                CaseProblem(
                    str(path),
                    0,
                    f"thresholds[{i}].metric",
                    f"{t.metric!r} is not a metric of lane kind {spec.kind!r}; it emits {sorted(emitted)}",
                )
                for i, t in enumerate(spec.thresholds)
                if t.metric not in emitted
            )
        if any(s.name == spec.name for s in specs):
            problems.append(CaseProblem(str(path), 0, "name", f"lane name {spec.name!r} used by two folders"))
        specs.append(spec)
    if problems:
        raise CaseFileError(problems)
    return sorted(specs, key=lambda s: s.name)


def find_lane(name: str, root: Path | None = None) -> LaneSpec:
    for spec in discover_lanes(root):
        if spec.name == name:
            return spec
    names = [s.name for s in discover_lanes(root)]
    raise KeyError(f"no lane named {name!r}; lanes: {names}")
