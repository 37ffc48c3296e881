"""The project the framework tests run in: lanes imported from a copy of the small checkout
next to this file; and the webhook receiver of the notification tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from eval_pipeline.core.settings import PROJECT_ENV
from eval_pipeline_tests.notify.conftest import receiver  # noqa: F401 (a fixture)

CHECKOUT = Path(__file__).with_name("checkout")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose lanes are the checkout's, imported; the checkout is a copy (tests change it)."""
    root = tmp_path / "project"
    (root / "evals").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.eval-pipeline]\nlanes = "evals"\n', encoding="utf-8")
    shutil.copytree(CHECKOUT, tmp_path / "checkout")
    monkeypatch.setenv(PROJECT_ENV, str(root))
    monkeypatch.setenv("FIXTURE_CHECKOUT", str(tmp_path / "checkout"))
    return root
