"""The code location: every lane under evals/ as an asset group, with its job and nightly schedule."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.dagster_wiring import build_definitions

defs = build_definitions()


def celery_definitions() -> dg.Definitions:
    """The same code location with steps on Celery workers, whatever ``EVAL_PIPELINE_EXECUTOR``
    says: what ``eval-pipeline run --executor celery`` launches and its workers load."""
    return build_definitions(executor_name="celery")
