"""Files that travel with the package, for ``eval-pipeline init`` and for a project that lacks
its own: the built-in lanes (the repository's ``evals/`` folder, with its ``runtimes.yaml``),
the Dagster instance and workspace files, and the example lane a new project starts with.

In a checkout, ``lanes``, ``dagster.yaml`` and ``workspace.yaml`` here are symbolic links to
the repository's own files, so each exists once; a wheel holds copies (package data).
"""

from __future__ import annotations

from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent
BUILTIN_LANES = BUILTIN_DIR / "lanes"
EXAMPLE_LANE = BUILTIN_DIR / "example_answers"
DAGSTER_YAML = BUILTIN_DIR / "dagster.yaml"
WORKSPACE_YAML = BUILTIN_DIR / "workspace.yaml"
