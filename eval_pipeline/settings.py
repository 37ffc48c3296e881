"""Where things live. Each location has one environment variable and one default.

Defaults are resolved at call time (never at import), so tests and the UI can point a
process elsewhere by setting the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent

EVALS_ENV = "EVAL_PIPELINE_EVALS"
HISTORY_ENV = "EVAL_PIPELINE_HISTORY"
RUNTIME_ENV = "EVAL_PIPELINE_RUNTIME"
STATE_ENV = "EVAL_PIPELINE_STATE"
CELERY_BROKER_ENV = "EVAL_PIPELINE_CELERY_BROKER"
CELERY_BACKEND_ENV = "EVAL_PIPELINE_CELERY_BACKEND"

DEFAULT_RUNTIME = "reference"


def state_dir() -> Path:
    """Folder for everything the pipeline generates locally (ignored by git)."""
    return Path(os.environ.get(STATE_ENV) or PROJECT_ROOT / ".eval_pipeline")


def evals_dir() -> Path:
    """The folder holding one sub-folder per lane."""
    return Path(os.environ.get(EVALS_ENV) or PROJECT_ROOT / "evals")


def targets_file() -> Path:
    """The runtime targets file (see :mod:`eval_pipeline.runtimes.targets`)."""
    return evals_dir() / "runtimes.yaml"


def history_root() -> str:
    """History root: a local folder or any fsspec URL (``s3://bucket/prefix``)."""
    return os.environ.get(HISTORY_ENV) or str(state_dir() / "history")


def runtime_spec() -> str:
    """The runtime target (a name, or a raw spec) used when the command line names none."""
    return os.environ.get(RUNTIME_ENV) or DEFAULT_RUNTIME


def dagster_home() -> Path:
    """DAGSTER_HOME if set, else a folder under the state dir that gets the repo's dagster.yaml."""
    return Path(os.environ.get("DAGSTER_HOME") or state_dir() / "dagster_home")


def celery_broker() -> str:
    """The Celery broker URL (``redis://host:6379/0``), or '' when none is set."""
    return os.environ.get(CELERY_BROKER_ENV, "")


def celery_backend() -> str:
    """The Celery result backend URL: its own variable, else the broker."""
    return os.environ.get(CELERY_BACKEND_ENV) or celery_broker()


class SettingError(ValueError):
    """An environment variable holds something its setting cannot take (bad input, exit 2)."""


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
