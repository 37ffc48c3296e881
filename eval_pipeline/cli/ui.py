"""``eval-pipeline ui``: the Dagster webserver and daemon on the project's instance, until Ctrl-C.

Both run in the instance folder (``$DAGSTER_HOME``, so the ``dagster.yaml`` Dagster finds beside
it is the one in use: no warning about another), each in a session of its own, so a Ctrl-C
reaches this process only and it stops them together: SIGINT to each, then, for whatever is
still running after :data:`STOP_S`, SIGKILL to its process group (code servers included).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from eval_pipeline.cli.common import EXIT_BAD_INPUT, app, bad_input_exits, out, print_plain
from eval_pipeline.core import pin_project

STOP_S = 20.0  # how long the webserver and daemon get to stop on their own


@app.command("ui")
def ui(
    port: Annotated[int, typer.Option(help="Port of the webserver on 127.0.0.1.")] = 3000,
) -> None:
    """The Dagster UI and daemon (schedules, sensors) on this project's instance, until Ctrl-C."""
    from eval_pipeline.dagster_wiring.launch import ensure_instance

    with bad_input_exits():
        project = pin_project()  # the webserver and daemon run in the instance folder: tell them
    workspace = project.root / "workspace.yaml"
    if not workspace.is_file():
        print_plain(f"error: {workspace} does not exist; `eval-pipeline init {project.root}` writes one")
        raise typer.Exit(EXIT_BAD_INPUT)
    home = Path(ensure_instance().root_directory)
    bin_dir = Path(sys.executable).parent
    commands = [
        [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)],
        [str(bin_dir / "dagster-webserver"), "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)],
    ]
    children = [subprocess.Popen(command, cwd=home, start_new_session=True) for command in commands]
    out().print(f"Dagster UI on http://127.0.0.1:{port} (instance {home}); Ctrl-C stops it", highlight=False)
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.2)
    finally:
        stop_all(children)
        for s, handler in previous.items():
            signal.signal(s, handler)


def stop_all(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGINT to every child still running, then SIGKILL to the process group of any that
    has not exited within :data:`STOP_S`."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_S
    for child in children:
        with suppress(subprocess.TimeoutExpired):
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        with suppress(ProcessLookupError):  # what is left of its group (a code server it started)
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
