"""A project is found from the working directory (``[tool.eval-pipeline]`` in pyproject.toml),
the environment still overrides each location, and ``eval-pipeline init`` makes a folder one
without overwriting anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.builtin import BUILTIN_LANES
from eval_pipeline.cli import app
from eval_pipeline.core.settings import (
    EVALS_ENV,
    PROJECT_ENV,
    STATE_ENV,
    NoProjectError,
    SettingError,
    evals_dir,
    find_project,
    project,
    state_dir,
    targets_file,
)
from eval_pipeline_tests.paths import PROJECT_ROOT

MARKER = '[project]\nname = "theirs"\n\n[tool.eval-pipeline]\n'


def write_marker(folder: Path, table: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(MARKER + table, encoding="utf-8")
    return folder


def test_the_project_is_the_nearest_folder_above_with_the_table(tmp_path: Path) -> None:
    root = write_marker(tmp_path / "repo")
    inner = root / "packages" / "app"
    inner.mkdir(parents=True)
    (inner / "pyproject.toml").write_text(
        '[project]\nname = "app"\n', encoding="utf-8"
    )  # no table: passed over
    found = find_project(inner / ".")
    assert found.root == root.resolve()
    assert (found.lanes, found.runtimes, found.state) == (
        root.resolve() / "evals",
        root.resolve() / "evals" / "runtimes.yaml",
        root.resolve() / ".eval_pipeline",
    )


def test_the_table_names_each_location_relative_to_the_project(tmp_path: Path) -> None:
    root = write_marker(
        tmp_path, 'lanes = "eval_lanes"\nruntimes = "config/targets.yaml"\nstate = "var/ep"\n'
    ).resolve()
    found = find_project(root)
    assert (found.lanes, found.runtimes, found.state) == (
        root / "eval_lanes",
        root / "config" / "targets.yaml",
        root / "var" / "ep",
    )
    # the runtimes file follows a lanes folder that names none
    write_marker(tmp_path / "other", 'lanes = "eval_lanes"\n')
    assert (
        find_project(tmp_path / "other").runtimes
        == (tmp_path / "other" / "eval_lanes" / "runtimes.yaml").resolve()
    )


@pytest.mark.parametrize(
    ("table", "says"),
    [
        (
            'lanes = "evals"\nlane = "x"\n',
            ":6: [tool.eval-pipeline] lane: unknown key; the keys are lanes, runtimes, state",
        ),
        ("state = 3\n", ":5: [tool.eval-pipeline] state: expected a path (a non-empty string), got 3"),
    ],
)
def test_a_bad_table_is_an_error_at_its_line(tmp_path: Path, table: str, says: str) -> None:
    write_marker(tmp_path, table)
    with pytest.raises(SettingError) as raised:
        find_project(tmp_path)
    assert str(raised.value) == f"{(tmp_path / 'pyproject.toml').resolve()}{says}"


def test_a_pyproject_that_is_not_toml_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.eval-pipeline]\nlanes = "\xff"\n')
    with pytest.raises(SettingError, match=r"pyproject.toml: not valid TOML \(UTF-8\)"):
        find_project(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.eval-pipeline\n", encoding="utf-8")
    with pytest.raises(SettingError, match=r"not valid TOML \(UTF-8\): .*line 1"):
        find_project(tmp_path)


def test_outside_any_project_the_error_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(
        NoProjectError, match=r"no pyproject.toml with a \[tool.eval-pipeline\] table"
    ) as raised:
        find_project(tmp_path)
    assert "`eval-pipeline init`" in str(raised.value) and "--project DIR" in str(raised.value)


def test_the_environment_overrides_each_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_marker(tmp_path / "repo", 'lanes = "eval_lanes"\nruntimes = "targets.yaml"\n').resolve()
    monkeypatch.setenv(PROJECT_ENV, str(root / "eval_lanes"))  # any folder inside it
    (root / "eval_lanes").mkdir()
    monkeypatch.delenv(STATE_ENV)
    assert project().root == root
    assert (evals_dir(), targets_file(), state_dir()) == (
        root / "eval_lanes",
        root / "targets.yaml",
        root / ".eval_pipeline",
    )
    monkeypatch.setenv(EVALS_ENV, str(tmp_path / "elsewhere"))  # a lanes folder with its own runtimes.yaml
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    assert (evals_dir(), targets_file(), state_dir()) == (
        tmp_path / "elsewhere",
        tmp_path / "elsewhere" / "runtimes.yaml",
        tmp_path / "state",
    )


def test_the_working_directory_finds_the_project_when_nothing_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_marker(tmp_path / "repo").resolve()
    (root / "src").mkdir()
    monkeypatch.delenv(PROJECT_ENV)
    monkeypatch.chdir(root / "src")
    assert evals_dir() == root / "evals"


def test_this_repository_is_a_project() -> None:
    found = find_project(PROJECT_ROOT / "eval_pipeline" / "cli")
    assert found.root == PROJECT_ROOT and found.lanes == PROJECT_ROOT / "evals"
    assert found.runtimes == PROJECT_ROOT / "evals" / "runtimes.yaml"
    # the package's built-in lanes are this repository's evals/ folder, not a copy of it
    assert BUILTIN_LANES.resolve() == (PROJECT_ROOT / "evals").resolve()


def cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``eval-pipeline ARGS`` in a child process run in ``cwd``, with no project or location
    named by the environment: every location comes from the project it finds."""
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith("EVAL_PIPELINE_") and k != "DAGSTER_HOME"
    }
    return subprocess.run(
        [sys.executable, "-c", "from eval_pipeline.cli import main; main()", *args],
        cwd=cwd,
        env={**environment, "PYTHONPATH": str(PROJECT_ROOT), "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_command_outside_any_project_exits_2_saying_how_to_make_one(tmp_path: Path) -> None:
    here = tmp_path / "here"
    here.mkdir()
    broker = {"EVAL_PIPELINE_CELERY_BROKER": "redis://127.0.0.1:1/0"}  # never reached
    for args in (["validate"], ["run", "--lane", "x"], ["history"], ["cache", "stats"], ["ui"], ["worker"]):
        done = cli(args, here, **broker)
        assert done.returncode == 2, (args, done.stderr)
        assert "is not in an eval-pipeline project" in done.stderr and "eval-pipeline init" in done.stderr
        assert "Traceback" not in done.stderr
    assert list(here.iterdir()) == []  # nothing written


def test_a_copy_of_this_repository_reads_its_own_files_with_this_checkouts_code(tmp_path: Path) -> None:
    """A clone run with another checkout's package: its own lanes are validated, and its own
    notify.yaml looked for, from its folder or named with --project."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("pyproject.toml", "dagster.yaml", "workspace.yaml"):
        (clone / name).write_bytes((PROJECT_ROOT / name).read_bytes())
    subprocess.run(["cp", "-r", str(PROJECT_ROOT / "evals"), str(clone / "evals")], check=True)
    assert cli(["validate"], clone).returncode == 0
    done = cli(["run", "--lane", "refusal_calibration", "--notify"], clone)
    assert done.returncode == 2 and str(clone / "evals" / "notify.yaml") in done.stderr, done.stderr
    assert str(PROJECT_ROOT / "evals") not in done.stderr
    lane = clone / "evals" / "deterministic_fluency" / "lane.yaml"
    lane.write_text(
        lane.read_text(encoding="utf-8").replace("nightly_splits: [public]", "nightly_splits: [nope]")
    )
    for args, cwd in ((["validate"], clone / "evals"), (["--project", str(clone), "validate"], tmp_path)):
        done = cli(args, cwd)
        assert done.returncode == 2, done.stderr
        assert f"{lane}:" in done.stderr and "nope" in done.stderr


def init(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["init", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_init_scaffolds_a_project_and_a_second_init_skips_everything(tmp_path: Path) -> None:
    root = tmp_path / "theirs"
    code, output = init([str(root)])
    assert code == 0, output
    assert output.splitlines()[:6] == [
        "wrote pyproject.toml",
        "wrote evals/example_answers/",
        "wrote evals/runtimes.yaml",
        "wrote workspace.yaml",
        "wrote dagster.yaml",
        "wrote .gitignore",
    ]
    assert find_project(root).lanes == root.resolve() / "evals"
    assert (root / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == ".eval_pipeline/"
    assert (root / "evals" / "runtimes.yaml").read_bytes() == (
        PROJECT_ROOT / "evals" / "runtimes.yaml"
    ).read_bytes()
    assert {p.name for p in (root / "evals").iterdir()} == {"example_answers", "runtimes.yaml"}
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    code, output = init([str(root)])
    assert code == 0
    assert output.splitlines()[:6] == [
        "skipped pyproject.toml (it has a [tool.eval-pipeline] table already)",
        "skipped evals/example_answers/ (it exists)",
        "skipped evals/runtimes.yaml (it exists)",
        "skipped workspace.yaml (it exists)",
        "skipped dagster.yaml (it exists)",
        "skipped .gitignore (it ignores .eval_pipeline/ already)",
    ]
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert CliRunner().invoke(app, ["--project", str(root), "validate"]).exit_code == 0


def test_init_adds_to_an_existing_repository_beside_its_own_evals_folder(tmp_path: Path) -> None:
    pyproject = '[project]\nname = "theirs"\n'
    (tmp_path / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    (tmp_path / ".gitignore").write_text("node_modules/", encoding="utf-8")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "their_framework.yaml").write_text("mine: true\n", encoding="utf-8")
    code, output = init([str(tmp_path), "--lanes", "eval_lanes", "--examples"])
    assert code == 0, output
    assert (
        (tmp_path / "pyproject.toml").read_text(encoding="utf-8").startswith(pyproject + "\n# eval-pipeline")
    )
    assert "added to pyproject.toml" in output and "added to .gitignore" in output
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == "node_modules/\n.eval_pipeline/\n"
    assert os.listdir(tmp_path / "evals") == ["their_framework.yaml"]
    lanes = {p.name for p in (tmp_path / "eval_lanes").iterdir()}
    builtin = {p.name for p in BUILTIN_LANES.iterdir() if p.is_dir()}
    assert len(builtin) == 6 and lanes == builtin | {"example_answers", "runtimes.yaml"}
    assert find_project(tmp_path).lanes == tmp_path.resolve() / "eval_lanes"
    assert CliRunner().invoke(app, ["--project", str(tmp_path), "validate"]).exit_code == 0


@pytest.mark.parametrize(
    ("files", "args", "says"),
    [
        ({}, ["--lanes", "../outside"], "--lanes must be a folder inside the project"),
        ({"pyproject.toml": "[project\n"}, [], "pyproject.toml: not valid TOML"),
        ({"pyproject.toml": '[tool.eval-pipeline]\nlanes = ""\n'}, [], "lanes: expected a path"),
    ],
)
def test_init_refuses_bad_input_and_writes_nothing(
    tmp_path: Path, files: dict[str, str], args: list[str], says: str
) -> None:
    root = tmp_path / "theirs"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    code, output = init([str(root), *args])
    assert code == 2 and says in output, output
    assert sorted(p.name for p in root.iterdir()) == sorted(files)


def test_project_naming_a_missing_folder_exits_2(tmp_path: Path) -> None:
    done = cli(["--project", str(tmp_path / "missing"), "validate"], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"names {tmp_path / 'missing'}, which is not a folder" in done.stderr
