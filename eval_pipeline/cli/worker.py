"""``eval-pipeline worker``: a Celery worker that runs lane steps (the ``scale`` extra)."""

from __future__ import annotations

import os
import socket
from typing import Annotated

import typer

from eval_pipeline.cli.common import EXIT_BAD_INPUT, app, bad_input_exits, err
from eval_pipeline.core import CELERY_BROKER_ENV, celery_broker, evals_dir


@app.command()
def worker(
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue", "-q", help="Queue to serve (repeatable); default: dagster, the shared queue."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Steps run at once (processes).")] = 1,
    name: Annotated[
        str | None, typer.Option(help="Worker name; default: eval-pipeline-<pid>@<host>.")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Run lane steps from the Celery broker in EVAL_PIPELINE_CELERY_BROKER until stopped."""
    if not celery_broker():
        err().print(f"[red]error:[/red] set {CELERY_BROKER_ENV} to the broker URL (e.g. redis://host:6379/0)")
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        from eval_pipeline.dagster_wiring.celery import DEFAULT_QUEUE, worker_app, worker_argv
    except ImportError as exc:
        err().print(f"[red]error:[/red] Celery is not installed ({exc}): pip install 'eval-pipeline[scale]'")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    with bad_input_exits():
        evals_dir()  # the project it serves (its lanes): found here, before any step arrives
    worker_name = name or f"eval-pipeline-{os.getpid()}@{socket.gethostname()}"
    worker_app().worker_main(worker_argv(queue or [DEFAULT_QUEUE], concurrency, worker_name, loglevel))
