"""Where things live. Each location has one environment variable and one default, and the
defaults come from the *project*: the folder, found from the working directory, whose
``pyproject.toml`` has a ``[tool.eval-pipeline]`` table::

    [tool.eval-pipeline]
    lanes = "evals"                  # one sub-folder per lane (default: evals)
    runtimes = "evals/runtimes.yaml" # the runtime targets (default: runtimes.yaml in the lanes folder)
    state = ".eval_pipeline"         # what runs generate: history, Dagster home (default: .eval_pipeline)

The project is the nearest such folder at or above the working directory, or above
``EVAL_PIPELINE_PROJECT`` when that is set (``--project DIR`` sets it, so the processes a
command starts find the same project). An environment variable naming a location wins over
the project's: ``EVAL_PIPELINE_EVALS`` (a lanes folder, with its own ``runtimes.yaml``),
``EVAL_PIPELINE_STATE``, ``EVAL_PIPELINE_HISTORY``, ``DAGSTER_HOME``.

Everything is resolved at call time (never at import), so tests and the UI can point a
process elsewhere by setting the environment or changing directory.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PROJECT_ENV = "EVAL_PIPELINE_PROJECT"
EVALS_ENV = "EVAL_PIPELINE_EVALS"
HISTORY_ENV = "EVAL_PIPELINE_HISTORY"
RUNTIME_ENV = "EVAL_PIPELINE_RUNTIME"
STATE_ENV = "EVAL_PIPELINE_STATE"
CELERY_BROKER_ENV = "EVAL_PIPELINE_CELERY_BROKER"
CELERY_BACKEND_ENV = "EVAL_PIPELINE_CELERY_BACKEND"

DEFAULT_RUNTIME = "reference"

MARKER_FILE = "pyproject.toml"
MARKER_TABLE = "eval-pipeline"  # [tool.eval-pipeline]
DEFAULT_LANES = "evals"
RUNTIMES_FILE = "runtimes.yaml"  # in the lanes folder, unless the project names another file
DEFAULT_STATE = ".eval_pipeline"
PROJECT_KEYS = ("lanes", "runtimes", "state")


class SettingError(ValueError):
    """An environment variable or the project's table holds something its setting cannot
    take, or there is no project to take a location from (bad input, exit 2)."""


class NoProjectError(SettingError):
    """No folder at or above the starting one is an eval-pipeline project."""


@dataclass(frozen=True)
class Project:
    """A project's folder and the locations its ``[tool.eval-pipeline]`` table names, absolute."""

    root: Path
    lanes: Path
    runtimes: Path
    state: Path


def pin_project() -> Project:
    """The project, also exported in ``EVAL_PIPELINE_PROJECT``: the processes a command starts
    (Dagster's webserver and daemon, their code servers and the runs they launch) then find
    this one, whatever folder they run in."""
    found = project()
    os.environ[PROJECT_ENV] = str(found.root)
    return found


def project() -> Project:
    """The project found from ``EVAL_PIPELINE_PROJECT``, else from the working directory."""
    named = os.environ.get(PROJECT_ENV, "").strip()
    start = Path(named).expanduser() if named else Path.cwd()
    if named and not start.is_dir():
        raise SettingError(f"{PROJECT_ENV} (or --project) names {start}, which is not a folder")
    return find_project(start)


def find_project(start: Path) -> Project:
    """The nearest project at or above ``start``; :class:`NoProjectError` says how to make one."""
    start = start.resolve()
    for folder in (start, *start.parents):
        marker = folder / MARKER_FILE
        if marker.is_file():
            found = _read_marker(marker, marker.stat().st_mtime_ns)
            if found is not None:
                return found
    raise NoProjectError(
        f"{start} is not in an eval-pipeline project: no {MARKER_FILE} with a [tool.{MARKER_TABLE}] "
        f"table here or in any folder above. Make one with `eval-pipeline init` (here) or "
        f"`eval-pipeline init DIR`, or name one with --project DIR or {PROJECT_ENV}."
    )


@lru_cache(maxsize=16)
def _read_marker(marker: Path, mtime_ns: int) -> Project | None:
    """The project ``marker`` declares (None: a pyproject.toml without the table). Read once
    per version of the file (``mtime_ns`` is the cache key's part that sees an edit)."""
    try:
        text = marker.read_text(encoding="utf-8")
        document = tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingError(f"{marker}: not valid TOML (UTF-8): {exc}") from None
    tool = document.get("tool")
    table = tool.get(MARKER_TABLE) if isinstance(tool, dict) else None
    if table is None:
        return None
    where = f"{marker}: [tool.{MARKER_TABLE}]"
    if not isinstance(table, dict):
        raise SettingError(f"{where} must be a table of {', '.join(PROJECT_KEYS)}")
    for key, value in table.items():
        line = _line_of(text, key)
        at = f"{marker}:{line}: [tool.{MARKER_TABLE}] {key}" if line else f"{where} {key}"
        if key not in PROJECT_KEYS:
            raise SettingError(f"{at}: unknown key; the keys are {', '.join(PROJECT_KEYS)}")
        if not isinstance(value, str) or not value.strip():
            raise SettingError(f"{at}: expected a path (a non-empty string), got {value!r}")
    root = marker.parent
    lanes = root / table.get("lanes", DEFAULT_LANES)
    runtimes = root / table["runtimes"] if "runtimes" in table else lanes / RUNTIMES_FILE
    return Project(root=root, lanes=lanes, runtimes=runtimes, state=root / table.get("state", DEFAULT_STATE))


def _line_of(text: str, key: str) -> int:
    """The line (1-based) where ``key`` is set in the project's table, or 0 if not found."""
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            inside = stripped.replace(" ", "").startswith(f"[tool.{MARKER_TABLE}]")
        elif inside and stripped.split("=", 1)[0].strip().strip('"') == key:
            return number
    return 0


def state_dir() -> Path:
    """Folder for everything the pipeline generates locally (ignored by git)."""
    return Path(os.environ.get(STATE_ENV) or project().state)


def evals_dir() -> Path:
    """The folder holding one sub-folder per lane."""
    return Path(os.environ.get(EVALS_ENV) or project().lanes)


def targets_file() -> Path:
    """The runtime targets file (see :mod:`eval_pipeline.runtimes.targets`): the one in the
    lanes folder ``EVAL_PIPELINE_EVALS`` names, else the project's."""
    named = os.environ.get(EVALS_ENV)
    return Path(named) / RUNTIMES_FILE if named else project().runtimes


def history_root() -> str:
    """History root: a local folder or any fsspec URL (``s3://bucket/prefix``)."""
    return os.environ.get(HISTORY_ENV) or str(state_dir() / "history")


def runtime_spec() -> str:
    """The runtime target (a name, or a raw spec) used when the command line names none."""
    return os.environ.get(RUNTIME_ENV) or DEFAULT_RUNTIME


def dagster_home() -> Path:
    """DAGSTER_HOME if set, else a folder under the state dir that gets :func:`instance_template`."""
    return Path(os.environ.get("DAGSTER_HOME") or state_dir() / "dagster_home")


def instance_template() -> Path:
    """The ``dagster.yaml`` a new instance folder gets: the project's own, else the package's
    (also where the environment names every location and there is no project)."""
    from eval_pipeline.builtin import DAGSTER_YAML

    try:
        own = project().root / "dagster.yaml"
    except NoProjectError:
        return DAGSTER_YAML
    return own if own.is_file() else DAGSTER_YAML


def celery_broker() -> str:
    """The Celery broker URL (``redis://host:6379/0``), or '' when none is set."""
    return os.environ.get(CELERY_BROKER_ENV, "")


def celery_backend() -> str:
    """The Celery result backend URL: its own variable, else the broker."""
    return os.environ.get(CELERY_BACKEND_ENV) or celery_broker()


def whole_number_env(name: str, unit: str) -> int | None:
    """The whole number >= 1 the environment variable ``name`` sets (None: unset or blank);
    anything else is bad input, named with what it counts (``unit``)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SettingError(f"{name} must be a whole number of {unit} >= 1, got {text!r}")
    return value
