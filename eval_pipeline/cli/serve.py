"""``eval-pipeline serve-reference``: the reference runtime over OpenAI-compatible HTTP."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from eval_pipeline.cli.common import EXIT_BAD_INPUT, app, err, out


@app.command("serve-reference")
def serve_reference(  # noqa: PLR0913
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 picks a free one).")] = 8000,
    latency_ms: Annotated[float, typer.Option(help="Added to every answer, in milliseconds.")] = 0.0,
    fault_rate: Annotated[float, typer.Option(help="Fraction of requests answered 500 or 429.")] = 0.0,
    stall_rate: Annotated[
        float, typer.Option(help="Fraction of requests that stall before answering.")
    ] = 0.0,
    stall_s: Annotated[float, typer.Option(help="How long a stalled request waits, in seconds.")] = 30.0,
    retry_after_s: Annotated[float, typer.Option(help="Retry-After sent with a 429, in seconds.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the injected faults.")] = 0,
    no_gloss: Annotated[bool, typer.Option("--no-gloss", help="Serve reference:no-gloss.")] = False,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Require 'Authorization: Bearer $NAME' (the key read from env var NAME)."),
    ] = None,
) -> None:
    """Serve the reference runtime (POST /v1/chat/completions, GET /v1/models) on 127.0.0.1 until Ctrl-C."""
    from eval_pipeline.runtimes.serve import (
        COMPLETIONS_PATH,
        EXTRA_FIELDS,
        MODEL_ID,
        ReferenceServer,
        ServeConfig,
    )

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            err().print(f"[red]error:[/red] environment variable {api_key_env} is not set")
            raise typer.Exit(EXIT_BAD_INPUT)
    try:
        config = ServeConfig(
            latency_ms=latency_ms,
            fault_rate=fault_rate,
            stall_rate=stall_rate,
            stall_s=stall_s,
            retry_after_s=retry_after_s,
            seed=seed,
            glosses=not no_gloss,
            api_key=api_key,
        )
    except ValueError as exc:
        err().print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    server = ReferenceServer(port, config)
    lines = (
        # The first line is machine-readable so a script that started us can find the port.
        f"serving {server.base_url} ({COMPLETIONS_PATH})",
        # Its replies carry the typed fields beside the text, where a plain openai: run reads them.
        f"its replies carry {', '.join(EXTRA_FIELDS)} beside content, where openai: reads them; to run:",
        f"  eval-pipeline run --runtime openai:{server.base_url} -o model={MODEL_ID}",  # one line, to copy
    )
    for line in lines:
        out().print(line, markup=False, highlight=False, soft_wrap=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
