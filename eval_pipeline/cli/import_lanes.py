"""``eval-pipeline import-lanes PATH``: a framework checkout's lanes as framework_runner lane
folders (the work is :mod:`eval_pipeline.frameworks.importer`, imported when it runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eval_pipeline.cli.common import app, bad_input_exits, out


@app.command("import-lanes")
def import_lanes(
    checkout: Annotated[Path, typer.Argument(help="The framework checkout (its evals/<lane>/runner.py).")],
    into: Annotated[
        Path | None,
        typer.Option("--into", help="Folder the lane folders go in; default: the project's lanes."),
    ] = None,
    name: Annotated[
        str, typer.Option("--name", help="The checkout's short name: lane folders are <name>_<lane>.")
    ] = "framework",
    checkout_ref: Annotated[
        str | None,
        typer.Option(
            "--checkout-ref",
            help="How lane.yaml names the checkout, e.g. '${CORE_CHECKOUT}'; default: its path.",
        ),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option("--python", help="The checkout's interpreter; default: .venv/bin/python in it."),
    ] = None,
    state_env: Annotated[
        str | None,
        typer.Option("--state-env", help="Variable the runners read their engine-state folder from."),
    ] = None,
    deadline: Annotated[
        float | None, typer.Option("--deadline", min=1.0, help="Seconds a runner may take (default 3600).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change; write nothing.")] = False,
) -> None:
    """Write a framework_runner lane folder for every framework lane of a checkout (cases copied,
    thresholds left to state); list the lanes skipped and why; on a re-run, what changed."""
    from eval_pipeline.core import evals_dir
    from eval_pipeline.frameworks.importer import (
        ImportOptions,
        changes,
        import_checkout,
        kept_thresholds,
        write_lane,
    )

    with bad_input_exits():
        root = checkout.resolve()
        options = ImportOptions(checkout_ref or str(root), name, python, state_env, deadline)
        lanes = import_checkout(root, options)
        target = into or evals_dir()
    imported = [lane for lane in lanes if not lane.skipped]
    for lane in imported:
        folder = target / lane.folder
        lane.files = kept_thresholds(lane.files, folder)
        lane.changes = changes(lane.files, folder)
        if lane.changes and not dry_run:
            write_lane(lane.files, folder)
    verb = "would import" if dry_run else "imported"
    out().print(f"{verb} {len(imported)} lane(s) of {root} into {target}:", markup=False, highlight=False)
    for lane in imported:
        state = "unchanged" if not lane.changes else ("new" if "+ lane.yaml" in lane.changes else "changed")
        splits = sorted({path.split("/")[0] for path in lane.files if path.endswith("cases.jsonl")})
        out().print(
            f"  {lane.folder} ({lane.upstream}): {state}; splits {', '.join(splits)}",
            markup=False,
            highlight=False,
        )
        if state == "changed":
            for change in lane.changes:
                out().print(f"      {change}", markup=False, highlight=False)
    skipped = [lane for lane in lanes if lane.skipped]
    if skipped:
        out().print(f"skipped {len(skipped)} folder(s) with a runner.py:", markup=False, highlight=False)
        for lane in skipped:
            out().print(f"  {lane.upstream}: {lane.skipped}", markup=False, highlight=False)
