"""The package as a user installs it: the wheel, built from a copy of this repository, installed
into a fresh virtualenv outside the checkout, used in an empty folder that ``eval-pipeline init``
makes a project, and the Dagster definitions loaded from there. Nothing is read from or
written to the checkout.

The new virtualenv sees this one's site-packages (a ``.pth`` line) for the dependencies, so
nothing is downloaded; the editable install of this checkout, if any, is not active there
(its ``.pth`` files are not processed), and the test checks that the wheel's package is the one
imported.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval_pipeline_tests.dagster.processes import (
    STARTUP_TIMEOUT_S,
    free_port,
    graphql,
    wait_for_code_location,
)
from eval_pipeline_tests.paths import PROJECT_ROOT

# What the wheel is built from: the package and the files its symbolic links name.
SOURCES = ("pyproject.toml", "README.md", "eval_pipeline", "evals", "dagster.yaml", "workspace.yaml")
# Written by tools or other tests, never by what this test runs.
NOT_WATCHED = {
    ".git",
    ".venv",
    ".venv-dg",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    "out",
}


def checkout_files() -> dict[Path, int]:
    """Every file of the checkout (but tool caches) with its modification time."""
    files: dict[Path, int] = {}
    for folder, dirs, names in os.walk(PROJECT_ROOT):
        dirs[:] = [d for d in dirs if d not in NOT_WATCHED]
        for name in names:
            path = Path(folder) / name
            files[path] = path.lstat().st_mtime_ns
    return files


def user_environment(venv: Path) -> dict[str, str]:
    """The environment of a user's shell with the new virtualenv active: no eval-pipeline
    variables, no PYTHONPATH, no Dagster home."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EVAL_PIPELINE_", "DAGSTER_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    return {**keep, "PATH": f"{venv / 'bin'}{os.pathsep}{keep.get('PATH', '')}", "COLUMNS": "200"}


@pytest.mark.slow
def test_the_wheel_installed_elsewhere_makes_and_runs_a_project_in_an_empty_folder(tmp_path: Path) -> None:
    before = checkout_files()
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        path = PROJECT_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(path, source / name)
    dist = tmp_path / "dist"
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(dist),
        str(source),
    ]
    subprocess.run(build, check=True, cwd=tmp_path, timeout=600)
    (wheel,) = dist.glob("eval_pipeline-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    (venv_site,) = (venv / "lib").glob("python*/site-packages")
    (venv_site / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    install = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        str(wheel),
    ]
    subprocess.run(install, check=True, timeout=600, env=user_environment(venv))

    project = tmp_path / "theirs"
    project.mkdir()
    env = user_environment(venv)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=project, env=env, capture_output=True, text=True, timeout=600)

    imported = run(str(python), "-c", "import eval_pipeline; print(eval_pipeline.__file__)")
    assert Path(imported.stdout.strip()).is_relative_to(venv), imported  # the wheel's, not the checkout's

    done = run("eval-pipeline", "init")
    assert done.returncode == 0, done.stderr
    assert "wrote evals/example_answers/" in done.stdout
    assert run("eval-pipeline", "validate").returncode == 0
    passing = run("eval-pipeline", "run")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "example_answers [dev] · reference" in passing.stdout
    failing = run("eval-pipeline", "run", "--runtime", "reference-no-gloss")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "example_time_001 · no_dotted_inventory" in failing.stdout
    history = run("eval-pipeline", "history", "--format", "csv")
    assert history.returncode == 0, history.stderr
    assert "reference-no-gloss" in history.stdout and "example_answers" in history.stdout
    assert any((project / ".eval_pipeline" / "history").rglob("*.parquet"))

    # The code location the project's workspace.yaml names, loaded from the project's folder.
    env["DAGSTER_HOME"] = str(project / ".eval_pipeline" / "dagster_home")
    dagster = run(str(python), "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml")
    assert dagster.returncode == 0, dagster.stdout + dagster.stderr
    assert "All code locations passed validation" in dagster.stdout + dagster.stderr

    # The built-in lanes came with the wheel.
    examples = run("eval-pipeline", "init", "--examples")
    assert examples.returncode == 0 and "wrote evals/deterministic_fluency/" in examples.stdout
    assert run("eval-pipeline", "validate").returncode == 0

    assert checkout_files() == before


@pytest.mark.slow
def test_the_ui_started_inside_a_project_serves_that_projects_lanes(tmp_path: Path) -> None:
    """The webserver, daemon and code server run in the instance folder, here outside the
    project (its state folder is elsewhere): they find the project ``eval-pipeline ui`` found."""
    project = tmp_path / "theirs"
    init = subprocess.run(
        [sys.executable, "-c", "from eval_pipeline.cli import main; main()", "init", str(project)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert init.returncode == 0, init.stderr
    marker = project / "pyproject.toml"
    marker.write_text(
        marker.read_text(encoding="utf-8").replace('# state = ".eval_pipeline"', 'state = "../elsewhere"'),
        encoding="utf-8",
    )
    (project / "src").mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_PIPELINE_", "DAGSTER_"))}
    ui = subprocess.Popen(
        [sys.executable, "-c", "from eval_pipeline.cli import main; main()", "ui", "--port", str(port)],
        cwd=project / "src",
        env={**env, "PYTHONPATH": str(PROJECT_ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            assert ui.poll() is None and time.monotonic() < deadline, "the UI did not start"
            try:
                graphql(url, "{ version }")
                break
            except OSError:
                time.sleep(1)
        wait_for_code_location(url)
        query = "{ repositoriesOrError { ... on RepositoryConnection { nodes { jobs { name } schedules { name } } } } }"
        (repository,) = graphql(url, query)["repositoriesOrError"]["nodes"]
        jobs = {job["name"] for job in repository["jobs"]}
        schedules = " ".join(schedule["name"] for schedule in repository["schedules"])
        assert "example_answers_job" in jobs and "example_answers" in schedules  # its one lane
        assert not any("fluency" in name for name in [*jobs, schedules])  # none of this repository's
        assert (tmp_path / "elsewhere" / "dagster_home" / "dagster.yaml").is_file()
    finally:
        ui.send_signal(signal.SIGINT)
        try:
            ui.wait(timeout=60)
        except subprocess.TimeoutExpired:
            ui.kill()
            ui.wait()
