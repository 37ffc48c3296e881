"""A command line loads the module of the command it names only; `app` from Python has them all."""

from __future__ import annotations

import subprocess
import sys

import typer

from eval_pipeline_tests.paths import PROJECT_ROOT


def _loaded_after(argv: list[str]) -> set[str]:
    """The command modules a fresh interpreter has imported once the command line's are loaded."""
    probe = (
        "import sys; from eval_pipeline.cli import _load_commands; "
        f"_load_commands({argv!r}); "
        "print(' '.join(m for m in sys.modules if m.startswith('eval_pipeline.cli.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    return set(done.stdout.split())


def test_a_named_command_loads_its_module_only() -> None:
    loaded = _loaded_after(["run", "--lane", "x"])
    assert "eval_pipeline.cli.run" in loaded
    assert not loaded & {"eval_pipeline.cli.history", "eval_pipeline.cli.serve", "eval_pipeline.cli.show"}


def test_help_or_a_command_named_unlike_its_module_loads_them_all() -> None:
    for argv in (["--help"], ["diff"], []):
        assert {
            "eval_pipeline.cli.history",
            "eval_pipeline.cli.run",
            "eval_pipeline.cli.show",
        } <= _loaded_after(argv)


def test_app_from_python_has_every_command() -> None:
    from eval_pipeline.cli import app

    names = {command.name for command in typer.main.get_group(app).commands.values()}
    assert {"run", "show", "diff", "validate", "serve-reference", "history"} <= names


# What a command's work needs, and `--help` must not load to list the commands.
HEAVY = ("dagster", "pandas", "pyarrow", "numpy", "duckdb", "pydantic", "openai", "sqlalchemy", "yaml")


def test_help_lists_every_command_without_loading_their_work() -> None:
    probe = (
        "import sys; from eval_pipeline.cli import main; sys.argv = ['eval-pipeline', '--help']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert exit.code in (0, None), exit.code\n"
        f"print('loaded:', ' '.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    assert "Commands" in done.stdout and "serve-reference" in done.stdout
    assert done.stdout.splitlines()[-1].split() == ["loaded:"], done.stdout.splitlines()[-1]
