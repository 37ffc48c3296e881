"""What ``validate`` checks, and ``schema`` prints: every case file against its lane's case model
(composing each case's prompts, as ``run`` does next), the runtime targets file and the notify
file; a lane's case schema."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from eval_pipeline.cases import CaseFileError, CaseProblem, CaseStream, LoadedCase
from eval_pipeline.core import targets_file
from eval_pipeline.i18n.schema import evalcase_v1_schema_text
from eval_pipeline.lanes import LaneSpec, discover_lanes, find_lane, lane_kind
from eval_pipeline.notify.config import notify_file_problems
from eval_pipeline.run import lane_threads
from eval_pipeline.runtimes.targets import TargetsFileError, load_targets

EVALCASE_V1 = "evalcase-v1"  # the published schema's name in `schema`


def checked_cases(paths: list[Path] | None, lane: str | None) -> tuple[int, int, int]:
    """Check ``paths`` (default: every lane's case files), the targets and the notify file:
    (cases, files, lanes) when nothing is wrong, else CaseFileError with every problem."""
    problems: list[CaseProblem] = target_problems()
    lanes = discover_lanes()
    groups = _files_by_lane(lanes, paths, lane) if paths else {s.name: _lane_files(s) for s in lanes}
    by_name = {s.name: s for s in lanes}
    cases = 0
    for name, files in groups.items():
        model = lane_kind(by_name[name]).case_model
        loaded, lane_problems = validate_files(files, model)
        problems += lane_problems
        cases += len(loaded)
        if not lane_problems:  # what run does next: compose every case's prompts
            lane_threads(by_name[name], "validate", [item.case for item in loaded])
    problems += notify_file_problems(by_name, load_targets(targets_file()))
    if problems:
        raise CaseFileError(problems)
    return cases, sum(len(f) for f in groups.values()), len(groups)


def schema_text(name: str) -> str:
    """A lane's case schema (JSON Schema), or the published EvalCase v1 schema; KeyError if no lane."""
    if name == EVALCASE_V1:
        return evalcase_v1_schema_text()
    model = lane_kind(find_lane(name)).case_model
    return json.dumps(model.model_json_schema(), indent=2, ensure_ascii=False) + "\n"


def target_problems() -> list[CaseProblem]:
    """Every problem of the runtime targets file (each target's options included)."""
    try:
        load_targets(targets_file())
    except TargetsFileError as exc:
        return exc.problems
    return []


def _lane_files(spec: LaneSpec) -> list[Path]:
    return list(dict.fromkeys(path for split in spec.splits for path in spec.case_files(split)))


def _files_by_lane(
    lanes: list[LaneSpec], paths: list[Path], default_lane: str | None
) -> dict[str, list[Path]]:
    if default_lane is not None and default_lane not in {s.name for s in lanes}:
        raise KeyError(f"no lane named {default_lane!r}; lanes: {[s.name for s in lanes]}")
    groups: dict[str, list[Path]] = {}
    unplaced: list[CaseProblem] = []
    for path in paths:
        owner = next(
            (s.name for s in lanes if path.resolve().is_relative_to(s.folder.resolve())), default_lane
        )
        if owner is None:
            unplaced.append(
                CaseProblem(
                    str(path), 0, "(file)", "not inside a lane folder: name its lane with --lane NAME"
                )
            )
            continue
        groups.setdefault(owner, []).append(path)
    if unplaced:
        raise CaseFileError(unplaced)
    return groups


def validate_files(
    files: list[Path], model: type[BaseModel]
) -> tuple[list[LoadedCase[BaseModel]], list[CaseProblem]]:
    """Every problem of every file, and ids unique across all of them."""
    stream = CaseStream(files, model)
    loaded = list(stream)
    return loaded, stream.problems
