"""The ``eval-pipeline`` command line (typer + rich).

Every module in this package registers its commands on :data:`app`; this file only
collects them, so a command family is one module. A command line that names a module's
command (``eval-pipeline run …``) loads that module only: the others' imports (DuckDB, the
history views, the servers) are not paid by a run. Anything else (``--help``, a command
named differently from its module) loads them all, as does using :data:`app` from Python.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Any

from eval_pipeline.cli import common
from eval_pipeline.collector import no_final_collection


def _load_commands(argv: list[str] | None = None) -> None:
    """Import the command modules the command line needs (all of them without one)."""
    modules = [module.name for module in pkgutil.iter_modules(__path__) if module.name != "common"]
    named = argv[0] if argv else None
    for module in [named] if named in modules else modules:
        importlib.import_module(f"{__name__}.{module}")


def main() -> None:
    no_final_collection()
    _load_commands(sys.argv[1:])
    common.app()


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole command line, for tests and embedding
        _load_commands()
        return common.app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "main"]
