"""The code location: every lane under evals/ as an asset group, with its job and nightly schedule."""

from __future__ import annotations

from eval_pipeline.dagster_wiring.code_location import build_definitions

defs = build_definitions()
