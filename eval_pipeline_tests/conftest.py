"""Shared fixtures. Every test runs with its own state folder, history root and DAGSTER_HOME,
so nothing a test does lands in the repository or leaks into another test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.core.settings import PROJECT_ENV
from eval_pipeline_tests.paths import PROJECT_ROOT


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, each group in collection order. Workers take tests in this order
    (``--dist loadgroup``), so the long end-to-end runs start early and the many quick tests
    fill whichever worker is free at the end, instead of one long test keeping a worker busy
    while the other has nothing left."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    state = tmp_path / "state"
    home = state / "dagster_home"
    home.mkdir(parents=True)
    shutil.copyfile(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("EVAL_PIPELINE_STATE", str(state))
    monkeypatch.setenv("EVAL_PIPELINE_HISTORY", str(state / "history"))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("EVAL_PIPELINE_RUNTIME", raising=False)
    monkeypatch.delenv("EVAL_PIPELINE_EVALS", raising=False)
    # This repository is the project, wherever a test or the processes it starts run; set (not
    # deleted) so that `--project`, which sets it in this process, is undone after each test.
    monkeypatch.setenv(PROJECT_ENV, str(PROJECT_ROOT))
    yield state


@pytest.fixture
def history_root(isolated_state: Path) -> Path:
    return isolated_state / "history"


@pytest.fixture
def repo_root() -> Path:
    return PROJECT_ROOT
