"""What every command shares: the typer app, the consoles and the exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from eval_pipeline.cases.loading import CaseFileError
from eval_pipeline.runtimes.base import RuntimeSpecError

EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # a blocking (ERROR) check failed
EXIT_BAD_INPUT = 2  # bad case files, lane files, runtime spec or arguments

app = typer.Typer(
    name="eval-pipeline",
    help="Deterministic evaluation lanes for chat runtimes, orchestrated by Dagster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
history_app = typer.Typer(help="Query the Parquet history of every run.", invoke_without_command=True)
app.add_typer(history_app, name="history")

console = Console()
err_console = Console(stderr=True)


@contextmanager
def bad_input_exits() -> Iterator[None]:
    """Turn bad-input errors into a clear message on stderr and exit code 2."""
    try:
        yield
    except CaseFileError as exc:
        for problem in exc.problems:
            err_console.print(str(problem), markup=False, highlight=False, soft_wrap=True)
        err_console.print(f"[red]{len(exc.problems)} problem(s); nothing was run.[/red]")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except (RuntimeSpecError, KeyError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
