"""``eval-pipeline view``: a local web viewer over history (the pages of :mod:`eval_pipeline.viewer`)."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from eval_pipeline.cli.common import EXIT_BAD_INPUT, app, out, print_plain
from eval_pipeline.core import history_root


@app.command("view")
def view(
    root: Annotated[
        str | None,
        typer.Option(
            "--history", help="History root (folder or fsspec URL); default $EVAL_PIPELINE_HISTORY."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0 picks a free one).")] = 8765,
    allowed_hosts: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="Also answer requests for this host name (repeatable; *.domain for its subdomains). "
            "Answered already: localhost, 127.0.0.1, [::1], --host and the host of "
            "$EVAL_PIPELINE_VIEWER_URL; any other Host header is refused.",
        ),
    ] = None,
) -> None:
    """Serve every series, run, case transcript, lane grid and comparison in a browser, until Ctrl-C."""
    import uvicorn

    from eval_pipeline.viewer.server import make_app, served_hosts

    try:
        hosts = served_hosts(host, allowed_hosts or [])
    except ValueError as exc:
        print_plain(f"error: {exc}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    history = root or history_root()
    runs = readable_runs(history)
    listening = listen(host, port)
    bound = listening.getsockname()[1]
    out().print(
        f"eval-pipeline view: http://{host}:{bound}/ ({runs} committed lane run(s) in {history}); "
        "Ctrl-C stops it",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    server = uvicorn.Server(uvicorn.Config(make_app(history, hosts), log_level="warning"))
    server.run(sockets=[listening])


def readable_runs(history: str) -> int:
    """How many committed lane runs ``history`` holds; exit 2 saying why when it cannot be read."""
    import duckdb

    from eval_pipeline.history.views import connect, reading_error

    try:
        with connect(history) as con:
            row = con.execute("SELECT count(*) FROM runs").fetchone()
    except (OSError, ValueError, ImportError, duckdb.Error) as exc:
        print_plain(f"error: cannot read history {history!r}: {reading_error(exc)}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    return int(row[0]) if row else 0


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``; exit 2 saying why when it cannot be bound."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listening = socket.create_server((host, port), family=family)
    except OSError as exc:
        print_plain(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    return listening
