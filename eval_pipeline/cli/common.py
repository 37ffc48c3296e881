"""What every command shares: the typer app, the consoles and the exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # a blocking (ERROR) check failed
EXIT_BAD_INPUT = 2  # bad case files, lane files, runtime spec or arguments
EXIT_RUN_FAILED = 3  # a stage raised (a bug or an environment problem), not a check
EXIT_VOID = 4  # the measurement failed: too many turns faulted (a runtime down), nothing was judged
SHORT_ID = 8  # characters of a run id shown in tables; any unique prefix names a run

app = typer.Typer(
    name="eval-pipeline",
    help="Deterministic evaluation lanes for chat runtimes, orchestrated by Dagster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def project_option(
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            metavar="DIR",
            help="Use the project at or above DIR (default: the one at or above the working directory).",
        ),
    ] = None,
) -> None:
    """Deterministic evaluation lanes for chat runtimes, orchestrated by Dagster."""
    from eval_pipeline.core.settings import PROJECT_ENV

    if project is not None:  # in the environment, so the processes a command starts see it too
        os.environ[PROJECT_ENV] = str(project.resolve())


history_app = typer.Typer(help="Query the Parquet history of every run.", invoke_without_command=True)
app.add_typer(history_app, name="history")

PIPE_WIDTH = 120  # columns when output goes to a file or pipe and COLUMNS is unset


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() else None
    if width is None and not stream.isatty():
        width = PIPE_WIDTH
    return Console(stderr=stderr, emoji=False, width=width)


def out() -> Console:
    """A console on stdout, made for this call: it sees the ``sys.stdout`` and ``COLUMNS`` the
    command runs with (not those of whoever imported this module first), and never reads
    emoji codes (``file.jsonl:100:`` stays as written)."""
    return _console(stderr=False)


def err() -> Console:
    """Like :func:`out`, on stderr."""
    return _console(stderr=True)


@contextmanager
def bad_input_exits() -> Iterator[None]:
    """Turn bad-input errors into a clear message on stderr and exit code 2.

    Messages quote input (case text, file names), so they are printed as plain text: no rich
    markup, emoji codes or highlighting is interpreted in them.
    """
    # Imported here, not with the module: every command module imports this one, and
    # `--help` must not pay for the case readers (pandas, the i18n lane) to list them.
    from eval_pipeline.cases.loading import FileProblemsError
    from eval_pipeline.core.settings import SettingError
    from eval_pipeline.i18n.prompts import LockedSplitError
    from eval_pipeline.runtimes.base import RuntimeSpecError

    try:
        yield
    except FileProblemsError as exc:
        for problem in exc.problems:
            print_plain(str(problem))
        err().print(f"[red]{len(exc.problems)} problem(s); nothing was run.[/red]")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except (RuntimeSpecError, LockedSplitError, SettingError, KeyError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print_plain(Text.assemble(("error:", "red"), " ", str(message)))
        raise typer.Exit(EXIT_BAD_INPUT) from None


def run_title(lane: str, split: str, runtime: str, case_set: str) -> str:
    """How a lane run is titled in ``run`` and ``show``: ``lane [split] · runtime``, plus
    ``· cases <case set>`` when it did not run the split's own cases."""
    cases = "" if case_set == split else f" · cases {case_set}"
    return f"{lane} [{split}] · {runtime}{cases}"


def short_id(run_id: str) -> str:
    return run_id[:SHORT_ID]


def print_plain(text: str | Text) -> None:
    """``text`` on stderr exactly as given (a str is never read as markup or emoji codes)."""
    err().print(text if isinstance(text, Text) else Text(text), highlight=False, soft_wrap=True, emoji=False)
