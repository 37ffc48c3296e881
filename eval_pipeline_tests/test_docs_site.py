"""The manual builds as a site with no broken link or page (``mkdocs build --strict``, as CI
builds it), every page is in its nav, and its generated reference pages say what the code says."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from eval_pipeline_tests.docs_pages import nav_pages
from eval_pipeline_tests.paths import PROJECT_ROOT

README_LINES = 250


def reference_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference", PROJECT_ROOT / "docs" / "tools" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_a_front_page() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LINES
    # Its picture is in the repository, and the manual's pages it links exist.
    assert (PROJECT_ROOT / "docs" / "images" / "tour-red-run.png").is_file()
    for page in ("docs/real-model.md", "docs/your-repository.md", "docs/write-a-lane.md"):
        assert f"]({page})" in readme and (PROJECT_ROOT / page).is_file()


def test_every_page_of_the_manual_is_in_its_nav() -> None:
    pages = {
        p for p in (PROJECT_ROOT / "docs").rglob("*.md") if "tools" not in p.relative_to(PROJECT_ROOT).parts
    }
    assert set(nav_pages()) == pages


def test_the_generated_reference_pages_are_what_the_code_says() -> None:
    tool = reference_tool()
    assert (PROJECT_ROOT / "docs" / "reference" / "cli.md").read_text("utf-8") == tool.cli_reference()
    assert (PROJECT_ROOT / "docs" / "reference" / "lane-schema.md").read_text("utf-8") == (
        tool.lane_schema_reference()
    )


def test_the_cli_reference_lists_every_command() -> None:
    import typer

    from eval_pipeline.cli import app

    page = reference_tool().cli_reference()
    for name in typer.main.get_command(app).commands:  # type: ignore[attr-defined]
        assert f"## `{name}`" in page


@pytest.mark.skipif(
    shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
    reason="mkdocs is not installed (the dev extra has it)",
)
def test_the_manual_builds_strictly(tmp_path: Path) -> None:
    mkdocs = str(Path(sys.executable).parent / "mkdocs")
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "site" / "write-a-lane" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
