"""The ``eval-pipeline`` command line (typer + rich).

Each command module (:data:`COMMAND_MODULES`) registers its commands on :data:`app`; this file
only collects them, so a command family is one module. A command module imports no more than
typer, rich and light modules at its top: the work of a command (pandas, DuckDB, Dagster, the
servers) is imported inside it, so ``--help`` lists every command without loading any of that.
A command line that names a module's command (``eval-pipeline run …``) loads that module only.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from eval_pipeline.cli import common
from eval_pipeline.core import SettingError, frozen_after, no_final_collection

COMMAND_MODULES = (
    "init",
    "run",
    "validate",
    "show",
    "history",
    "notify",
    "view",
    "serve",
    "ui",
    "worker",
    "cache",
    "import_lanes",
)


def _load_commands(argv: list[str] | None = None) -> None:
    """Import the command modules the command line needs (all of them without one)."""
    named = argv[0] if argv else None
    for module in [named] if named in COMMAND_MODULES else COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{module}")


def main() -> None:
    no_final_collection()
    with frozen_after():
        _load_commands(sys.argv[1:])
    try:
        common.app()
    except SettingError as exc:  # no project here, or a setting it cannot take: wherever it was asked
        common.print_plain(f"error: {exc}")
        sys.exit(common.EXIT_BAD_INPUT)


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole command line, for tests and embedding
        _load_commands()
        return common.app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMAND_MODULES", "app", "main"]
