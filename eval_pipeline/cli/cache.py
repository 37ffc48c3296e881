"""``eval-pipeline cache stats|clear``: the response cache under the state folder."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from eval_pipeline.cli.common import app

cache_app = typer.Typer(
    help="The response cache (run --cache, or cache: true on a target).", no_args_is_help=True
)
app.add_typer(cache_app, name="cache")


@cache_app.command()
def stats(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Entries and bytes kept, per runtime version."""
    from eval_pipeline.runtimes.cache import cache_root, cache_usage

    usage = cache_usage()
    if as_json:
        document = {
            "root": str(cache_root()),
            "versions": [
                {"runtime_version": u.runtime_version, "entries": u.entries, "bytes": u.bytes} for u in usage
            ],
        }
        typer.echo(json.dumps(document, indent=2))
        return
    for version in usage:
        typer.echo(
            f"runtime version {version.runtime_version}: {version.entries} entries, {version.bytes} bytes"
        )
    entries = sum(u.entries for u in usage)
    typer.echo(
        f"{entries} entries, {sum(u.bytes for u in usage)} bytes, {len(usage)} runtime version(s) in {cache_root()}"
    )


@cache_app.command()
def clear() -> None:
    """Remove every entry: the next run with the cache sends every session again."""
    from eval_pipeline.runtimes.cache import cache_root, clear_cache

    removed = clear_cache()
    typer.echo(f"removed {removed} entries from {cache_root()}")
