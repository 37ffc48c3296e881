"""``eval-pipeline show RUN [--case ID]``: what failed in one run and why, or one case's whole
transcript with each turn's verdicts (:mod:`eval_pipeline.cli.run_tables`)."""

from __future__ import annotations

from typing import Annotated

import typer

from eval_pipeline.cli.common import app, bad_input_exits, short_id
from eval_pipeline.core import history_root


@app.command("show")
def show(
    run_id: Annotated[
        str, typer.Argument(help="A run id, or any unique prefix of one (tables show 8 characters).")
    ],
    case: Annotated[str | None, typer.Option("--case", help="Show this case's whole transcript.")] = None,
    root: Annotated[
        str | None, typer.Option("--history", help="History root; default $EVAL_PIPELINE_HISTORY.")
    ] = None,
) -> None:
    """One run's failing cases with their reasons and faults, or one case's transcript with each turn's verdicts."""
    from eval_pipeline.cli.run_tables import find_run_tables, print_case, print_failing

    with bad_input_exits():
        runs = find_run_tables(run_id, root or history_root())
        if case is not None and not any(r.has_case(case) for r in runs):
            raise KeyError(f"run {short_id(runs[0].run_id)} has no case {case!r}")
    for run in runs:
        if case is None:
            print_failing(run)
        elif run.has_case(case):
            print_case(run, case)
