"""The README's picture is taken by ``docs/tools/screenshot.py`` from the tour's runs: the script
works, and what it photographs is what the README says (the red run failing its ERROR checks)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from eval_pipeline_tests.paths import PROJECT_ROOT

from .chromium import needs_chromium

pytestmark = [pytest.mark.slow, needs_chromium]
PNG = b"\x89PNG\r\n\x1a\n"


def screenshot_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_screenshot", PROJECT_ROOT / "docs" / "tools" / "screenshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_picture_is_the_tours_red_run(tmp_path: Path) -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    committed = PROJECT_ROOT / "docs" / "images" / "tour-red-run.png"
    assert f"]({committed.relative_to(PROJECT_ROOT).as_posix()})" in readme
    assert committed.read_bytes().startswith(PNG)
    picture = tmp_path / "picture.png"
    shown = screenshot_tool().take(picture)
    assert picture.read_bytes().startswith(PNG) and picture.stat().st_size > 10_000
    assert "refusal_calibration · public · reference-no-refusal spec reference:no-refusal · fail" in shown
    assert "fabrication_rate" in shown and "ERROR" in shown
