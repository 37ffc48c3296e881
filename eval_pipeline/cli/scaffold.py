"""What ``eval-pipeline init`` writes into a folder to make it a project, decided before anything
is written: each step either writes a file or folder that is not there, adds to a file that
lacks what it needs, or is skipped because what it would write is there already.

The project's files come from the package (:mod:`eval_pipeline.builtin`): the example lane, the
runtime targets of the built-in lanes (the reference runtime and the targets that show a lane
failing), the Dagster instance and workspace files, and with ``examples`` the built-in lanes.
"""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from eval_pipeline.builtin import BUILTIN_LANES, DAGSTER_YAML, EXAMPLE_LANE, WORKSPACE_YAML
from eval_pipeline.core import (
    DEFAULT_LANES,
    DEFAULT_STATE,
    MARKER_FILE,
    MARKER_TABLE,
    RUNTIMES_FILE,
    SettingError,
    find_project,
)

Action = Literal["write", "append", "skip"]


@dataclass(frozen=True)
class Step:
    """One file or folder of the project: what happens to it, and why when it is skipped."""

    path: Path
    action: Action
    source: Path | None = None  # a file or folder to copy (write)
    text: str = ""  # what is written, or appended
    why: str = ""  # why it is skipped

    def describe(self, root: Path) -> str:
        """``wrote evals/example_answers/``, ``added to .gitignore``, ``skipped dagster.yaml (it exists)``."""
        folder = self.path.is_dir() or (self.source is not None and self.source.is_dir())
        where = self.path.relative_to(root).as_posix() + ("/" if folder else "")
        if self.action == "skip":
            return f"skipped {where} ({self.why})"
        return f"{'wrote' if self.action == 'write' else 'added to'} {where}"


class InitError(SettingError):
    """The folder cannot become a project as asked (bad input, exit 2; nothing was written)."""


def marker_table(lanes: str) -> str:
    """The ``[tool.eval-pipeline]`` table naming ``lanes`` (the other locations as comments)."""
    return (
        "# eval-pipeline finds this project from any folder inside it. The lanes folder holds one\n"
        "# folder per lane; `runtimes` (the runtime targets) and `state` (history and the Dagster\n"
        "# instance, kept out of git) may be set too; their defaults are commented out.\n"
        f"[tool.{MARKER_TABLE}]\n"
        f'lanes = "{lanes}"\n'
        f'# runtimes = "{lanes}/{RUNTIMES_FILE}"\n'
        f'# state = "{DEFAULT_STATE}"\n'
    )


def lanes_folder(text: str) -> str:
    """``--lanes`` as a relative folder inside the project, or :class:`InitError`."""
    path = PurePosixPath(text.strip())
    if not text.strip() or path.is_absolute() or ".." in path.parts or path == PurePosixPath("."):
        raise InitError(f"--lanes must be a folder inside the project (relative, no '..'), got {text!r}")
    return path.as_posix()


def plan(root: Path, lanes: str = DEFAULT_LANES, examples: bool = False) -> list[Step]:
    """The steps that make ``root`` a project with its lanes in ``lanes`` (relative to it).

    An existing ``[tool.eval-pipeline]`` table is kept, and its lanes folder is the one filled."""
    if root.exists() and not root.is_dir():
        raise InitError(f"{root} is not a folder")
    steps: list[Step] = []
    marker = root / MARKER_FILE
    lanes_dir = root / lanes_folder(lanes)
    runtimes = lanes_dir / RUNTIMES_FILE
    state = DEFAULT_STATE
    if not marker.exists():
        steps.append(Step(marker, "write", text=marker_table(lanes_folder(lanes))))
    else:
        text = marker.read_text(encoding="utf-8")
        try:
            tool = tomllib.loads(text).get("tool", {})
        except tomllib.TOMLDecodeError as exc:
            raise InitError(f"{marker}: not valid TOML ({exc}); nothing was written") from None
        if isinstance(tool, dict) and MARKER_TABLE in tool:
            existing = find_project(root)
            lanes_dir, runtimes = existing.lanes, existing.runtimes
            if existing.state.is_relative_to(root):
                state = existing.state.relative_to(root).as_posix()
            steps.append(Step(marker, "skip", why=f"it has a [tool.{MARKER_TABLE}] table already"))
        else:
            separator = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
            steps.append(Step(marker, "append", text=separator + marker_table(lanes_folder(lanes))))
    lane_sources = [EXAMPLE_LANE]
    if examples:
        lane_sources += sorted(p for p in BUILTIN_LANES.iterdir() if p.is_dir())
    for source in lane_sources:
        steps.append(_copy(source, lanes_dir / source.name))
    steps.append(_copy(BUILTIN_LANES / RUNTIMES_FILE, runtimes))
    steps.append(_copy(WORKSPACE_YAML, root / "workspace.yaml"))
    steps.append(_copy(DAGSTER_YAML, root / "dagster.yaml"))
    steps.append(_ignore_state(root / ".gitignore", state))
    return steps


def _copy(source: Path, path: Path) -> Step:
    if path.exists():
        return Step(path, "skip", why="it exists")
    return Step(path, "write", source=source)


def _ignore_state(gitignore: Path, state: str) -> Step:
    """``.gitignore`` keeps the state folder (what runs generate) out of git."""
    line = f"{state}/"
    if not gitignore.exists():
        return Step(gitignore, "write", text=f"# what eval-pipeline runs generate\n{line}\n")
    text = gitignore.read_text(encoding="utf-8")
    if any(entry.strip().strip("/") == state for entry in text.splitlines()):
        return Step(gitignore, "skip", why=f"it ignores {line} already")
    return Step(gitignore, "append", text=("" if not text or text.endswith("\n") else "\n") + f"{line}\n")


def carry_out(steps: list[Step]) -> None:
    """Write what ``steps`` say (after :func:`plan` found nothing wrong)."""
    for step in steps:
        if step.action == "skip":
            continue
        step.path.parent.mkdir(parents=True, exist_ok=True)
        if step.source is not None and step.source.is_dir():
            shutil.copytree(step.source, step.path, ignore=shutil.ignore_patterns("__pycache__"))
        elif step.source is not None:
            shutil.copyfile(step.source, step.path)
        elif step.action == "write":
            step.path.write_text(step.text, encoding="utf-8")
        else:
            with step.path.open("a", encoding="utf-8") as handle:
                handle.write(step.text)
