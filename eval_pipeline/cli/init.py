"""``eval-pipeline init [DIR]``: make a folder an eval-pipeline project (:mod:`eval_pipeline.cli.scaffold`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eval_pipeline.cli.common import app, bad_input_exits, out
from eval_pipeline.core import DEFAULT_LANES


@app.command()
def init(
    folder: Annotated[
        Path, typer.Argument(metavar="[DIR]", help="The project's folder (made if missing).")
    ] = Path(),
    lanes: Annotated[
        str, typer.Option(help="The lanes folder, relative to DIR (beside another framework's evals/, say).")
    ] = DEFAULT_LANES,
    examples: Annotated[bool, typer.Option("--examples", help="Also copy the six built-in lanes.")] = False,
) -> None:
    """Make DIR (default: here) a project: the tool.eval-pipeline table in pyproject.toml, an
    example lane, runtimes.yaml, the Dagster files, .gitignore. Overwrites nothing: what is there
    already is skipped, and said."""
    from eval_pipeline.cli.scaffold import carry_out, plan

    root = folder.resolve()
    with bad_input_exits():
        steps = plan(root, lanes, examples)
        carry_out(steps)
    for step in steps:
        out().print(step.describe(root), highlight=False, markup=False)
    out().print(
        f"{root} is an eval-pipeline project: `eval-pipeline validate` checks its lanes, "
        "`eval-pipeline run` runs them against the reference runtime.",
        highlight=False,
        markup=False,
    )
