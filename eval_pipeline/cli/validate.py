"""``eval-pipeline validate`` (case files against their lane's case model) and ``eval-pipeline schema``
(what they check and print: :mod:`eval_pipeline.cli.checked_files`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eval_pipeline.cli.common import app, bad_input_exits, out
from eval_pipeline.dagster_wiring import fail_dead_runs_of_existing_instance


@app.command()
def validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Case files to check (default: every case file of every lane)."),
    ] = None,
    lane: Annotated[
        str | None, typer.Option(help="Lane whose case schema applies to files outside any lane folder.")
    ] = None,
) -> None:
    """Validate case files (and evals/runtimes.yaml); print every problem as file:line: field: message
    and exit 2 if any."""
    from eval_pipeline.cli.checked_files import checked_cases
    from eval_pipeline.run.workers import worker_count

    fail_dead_runs_of_existing_instance()
    with bad_input_exits():
        worker_count()  # a big file is validated by worker processes: a bad count is bad input now
        cases, files, lanes = checked_cases(paths, lane)
        out().print(f"{cases} case(s) in {files} file(s) of {lanes} lane(s): no problems.")


@app.command()
def schema(
    name: Annotated[
        str, typer.Argument(help="A lane's name, or evalcase-v1 (the published EvalCase v1 schema).")
    ],
) -> None:
    """Print a lane's case schema (JSON Schema), or the published EvalCase v1 schema."""
    from eval_pipeline.cli.checked_files import schema_text

    with bad_input_exits():
        typer.echo(schema_text(name), nl=False)
