"""The ``eval-pipeline`` command line (typer + rich).

Every module in this package registers its commands on :data:`app`; this file only
collects them, so a command family is one module.
"""

from __future__ import annotations

import importlib
import pkgutil

from eval_pipeline.cli.common import app


def _load_commands() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name != "common":
            importlib.import_module(f"{__name__}.{module.name}")


_load_commands()


def main() -> None:
    app()


__all__ = ["app", "main"]
